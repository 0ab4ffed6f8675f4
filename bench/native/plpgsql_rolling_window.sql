-- The plpgsql reference of rolling_window (bench/native/reference/rolling_window.sql),
-- called like ext_window.sql.
\set k random(1, :keys)
SELECT * FROM bench.rolling_window(:prefix::text || :k::text, :limit, :period::interval, 1,
                                   p_engine => :engine);
