-- A checksum computed after the upload (stores that do not hash on the way in) is recorded by key.
CREATE INDEX files_storage_key ON files (storage_key);
CREATE INDEX file_versions_storage_key ON file_versions (storage_key);
CREATE INDEX pending_contents_storage_key ON pending_contents (storage_key);

-- The size each part number's URLs were signed for, at most (part number → bytes): what the parts
-- of a session can hold in the store is bounded by their sum.
ALTER TABLE multipart_sessions ADD COLUMN part_grants jsonb NOT NULL DEFAULT '{}';
