-- An S3 multipart upload to a key that holds a file makes new content of that file, as a PutObject
-- there does: its session names that content, and the file's record stays as it is until it completes.
ALTER TABLE multipart_sessions ADD COLUMN content_id text COLLATE "C" REFERENCES pending_contents (id);

-- The metadata new content brings (the x-amz-meta-* of its upload), set on the file when it becomes current.
ALTER TABLE pending_contents ADD COLUMN metadata jsonb;

-- A file has one session for its first content and any number for new content.
DROP INDEX multipart_sessions_file;
CREATE UNIQUE INDEX multipart_sessions_file ON multipart_sessions (file_id) WHERE content_id IS NULL;
CREATE INDEX multipart_sessions_file_contents ON multipart_sessions (file_id) WHERE content_id IS NOT NULL;

-- A version's ETag as the store sealed it (an MD5 for bytes written through the S3 endpoint), for
-- ListObjectVersions and GetObject of a version; null for versions recorded before it was kept.
ALTER TABLE file_versions ADD COLUMN etag text;
