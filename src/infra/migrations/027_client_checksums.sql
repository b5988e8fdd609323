-- The additional checksum an S3 write sent with its bytes, which Coffer verified as they arrived
-- (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1 or -sha256, as a header or an aws-chunked
-- trailer): {"algorithm": "crc32", "value": "<base64 of the digest>"}; null for none, as for content
-- assembled from parts. It belongs to the content, as its SHA-256 does: the file's current content,
-- each version, and new content on its way keep their own.
ALTER TABLE files ADD COLUMN client_checksum jsonb;
ALTER TABLE file_versions ADD COLUMN client_checksum jsonb;
ALTER TABLE pending_contents ADD COLUMN client_checksum jsonb;
