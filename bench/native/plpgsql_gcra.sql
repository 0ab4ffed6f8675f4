-- The plpgsql reference of gcra (bench/native/reference/gcra.sql),
-- called like ext_bucket.sql.
\set k random(1, :keys)
SELECT * FROM bench.gcra(:prefix::text || :k::text, :limit, :period::interval, 1,
                         p_engine => :engine, p_burst => :burst);
