-- A delivery's body is its event's payload, read from events when the delivery is claimed: a row
-- that every claim and every outcome rewrites (with its WAL) no longer carries a copy of it, and an
-- event going to ten webhooks is stored once, not eleven times.
ALTER TABLE deliveries DROP COLUMN payload;
-- So every delivery's event must stay: a delivery whose event were gone could never be sent.
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event FOREIGN KEY (event_id) REFERENCES events (id) NOT VALID;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_event;
