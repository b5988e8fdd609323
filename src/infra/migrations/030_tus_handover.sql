-- When a request asked the stalled PATCH holding a tus upload to let go of it: the holder stores what
-- it received of its part in flight, then releases the upload. Null while nobody asked.
ALTER TABLE tus_uploads ADD COLUMN release_wanted_at timestamptz(3);
