-- Whether a multipart upload makes a new file at an S3 key (CreateMultipartUpload): its completion
-- keeps the key to one file (see claimKey) also when the reaper settles it, its client gone. A REST or
-- tus upload holds no key, and new content of a file has the file's.
ALTER TABLE multipart_sessions ADD COLUMN keyed boolean NOT NULL DEFAULT false;
