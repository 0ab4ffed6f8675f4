-- The database of bench/memory_wal.sh: the extension, nothing else.
CREATE EXTENSION ratelimit;
