-- A claimed delivery's lease is kept in a column of its own instead of moving next_attempt_at, which
-- deliveries_due indexes. The claim and its renewals then change no indexed column, and with room
-- left on the row's page (fillfactor, for the rows written from now on) each is a HOT update: no new
-- entry in any of the table's three indexes. A pending delivery is claimable once next_attempt_at has
-- come and leased_until, if set, has passed. A claim takes a page's rows together (they were queued
-- together), so the page keeps room for a second version of each: with a fifth free, two claims in
-- three still moved their row to another page.
ALTER TABLE deliveries ADD COLUMN leased_until timestamptz(3);
ALTER TABLE deliveries SET (fillfactor = 50);
