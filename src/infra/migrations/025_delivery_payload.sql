-- A delivery's body is its event's payload, read from events when the delivery is claimed: a row
-- that every claim and every outcome rewrites (with its WAL) no longer carries a copy of it, and an
-- event going to ten webhooks is stored once, not eleven times. Events are kept for good.
ALTER TABLE deliveries DROP COLUMN payload;
