-- The plpgsql reference of token_bucket (bench/native/reference/token_bucket.sql),
-- called like ext_bucket.sql.
\set k random(1, :keys)
SELECT * FROM bench.token_bucket(:prefix::text || :k::text, :limit, :period::interval, 1,
                                 p_engine => :engine, p_burst => :burst);
