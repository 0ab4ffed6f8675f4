-- The plpgsql reference of sliding_window (bench/native/reference/sliding_window.sql),
-- called like ext_window.sql.
\set k random(1, :keys)
SELECT * FROM bench.sliding_window(:prefix::text || :k::text, :limit, :period::interval, 1,
                                   p_engine => :engine);
