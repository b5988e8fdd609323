-- When a session was claimed for assembly: one left `completing` by a process that died is recovered.
ALTER TABLE multipart_sessions ADD COLUMN completing_since timestamptz(3);
