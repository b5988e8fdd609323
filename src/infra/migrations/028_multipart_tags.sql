-- The tags an S3 CreateMultipartUpload sent (x-amz-tagging), as Coffer's tags: the file's tags once
-- the upload completes, whether it makes a new file or new content of one. null: it sent none, and
-- the file keeps its own.
ALTER TABLE multipart_sessions ADD COLUMN tags text[];
