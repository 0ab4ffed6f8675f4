-- The plpgsql reference of sliding_window_counter (bench/native/reference/sliding_window_counter.sql),
-- called like ext_window.sql.
\set k random(1, :keys)
SELECT * FROM bench.sliding_window_counter(:prefix::text || :k::text, :limit, :period::interval, 1,
                                           p_engine => :engine);
