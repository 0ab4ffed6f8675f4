-- The extension, token_bucket and gcra: ext_window.sql plus burst.
\set k random(1, :keys)
SELECT * FROM ratelimit.consume(:prefix::text || :k::text, :limit, :period::interval, 1,
                                p_algorithm => :algorithm, p_engine => :engine,
                                p_burst => :burst);
