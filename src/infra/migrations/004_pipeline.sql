-- The name of what the virus scanner found, kept on a quarantined file.
ALTER TABLE files ADD COLUMN scan_signature text;
