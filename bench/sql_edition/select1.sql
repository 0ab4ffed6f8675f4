-- The floor: a round trip that decides nothing.
SELECT 1;
