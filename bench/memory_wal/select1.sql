-- The floor: a round trip that does no work.
SELECT 1;
