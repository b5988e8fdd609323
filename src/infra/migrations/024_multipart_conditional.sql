-- Whether the complete that claimed a session held a condition on the key (S3's If-Match or
-- If-None-Match): one left `completing` is then aborted by the reaper, which cannot check it again.
ALTER TABLE multipart_sessions ADD COLUMN conditional boolean NOT NULL DEFAULT false;
