-- Benchmark database of one edition (bench/sql_edition.sh runs it in two databases of one
-- server: the C edition's, made here, and the SQL edition's, made by its plain file first):
-- the policy check_http measures, on the table engine with a limit no case reaches.
\set ON_ERROR_STOP on

SELECT pg_catalog.to_regclass('ratelimit.sql_edition') IS NULL AS c_edition \gset
\if :c_edition
CREATE EXTENSION ratelimit;
\endif

INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('bench.http', 1000000000, '365 days');
