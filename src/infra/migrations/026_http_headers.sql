-- The standard headers an S3 write stores with an object and its reads answer: Cache-Control,
-- Content-Disposition, Content-Encoding, Content-Language and Expires, names lowercased, values as
-- given; null for none. They belong to the content, as its type does: the file's current content,
-- each version, and new content on its way keep their own.
ALTER TABLE files ADD COLUMN http_headers jsonb;
ALTER TABLE file_versions ADD COLUMN http_headers jsonb;
ALTER TABLE pending_contents ADD COLUMN http_headers jsonb;
