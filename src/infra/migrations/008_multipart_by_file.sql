-- Confirm asks whether a file is uploaded in parts: one session per file, found by its file.
CREATE UNIQUE INDEX multipart_sessions_file ON multipart_sessions (file_id);
