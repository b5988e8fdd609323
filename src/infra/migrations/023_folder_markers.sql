-- Whether a folder is a key of its own in the S3 view (`path/`), as a zero-byte object of that name
-- is in S3: folders made on purpose (through the REST API, or an S3 PUT of `path/`) are; the folders
-- S3 writes create for a key's path are not, so that emptying them leaves no key the client never
-- wrote. Folders made before are all taken as made on purpose: their listing stays as it was.
ALTER TABLE folders ADD COLUMN s3_marker boolean NOT NULL DEFAULT true;

-- Listings walk markers alone, and find the markers under a folder in one range probe.
DROP INDEX folders_s3_key;
CREATE INDEX folders_s3_marker ON folders (project_id, (path || '/') COLLATE "C") WHERE s3_marker;
