-- The database of bench/batch.sh: the extension, nothing else. The keys are populated by
-- populate.sql, after the server has started with shared_preload_libraries = 'ratelimit'.
CREATE EXTENSION ratelimit;
