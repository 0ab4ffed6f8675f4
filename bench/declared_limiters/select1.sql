-- The floor: one round trip.
SELECT 1;
