-- The plpgsql reference of fixed_window (bench/native/reference/fixed_window.sql),
-- called like ext_window.sql.
\set k random(1, :keys)
SELECT * FROM bench.fixed_window(:prefix::text || :k::text, :limit, :period::interval, 1,
                                 p_engine => :engine);
