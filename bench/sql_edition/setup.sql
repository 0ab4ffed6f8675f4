-- Benchmark database of one edition (bench/sql_edition.sh runs it in two databases of one
-- server: the C edition's, made here, and the SQL edition's, made by its plain file first):
-- the policy check_http measures, on the table engine with a limit no case reaches.
\set ON_ERROR_STOP on

SELECT pg_catalog.to_regclass('ratelimit.sql_edition') IS NULL AS c_edition \gset
\if :c_edition
CREATE EXTENSION ratelimit;
\endif

INSERT INTO ratelimit.policies (name, "limit", period) VALUES ('bench.http', 1000000000, '365 days');

-- The SQL edition's database only: the least a PL/pgSQL function writing the table engine does
-- (update_only_table_10k.sql), declared as the SQL edition's functions are.
\if :c_edition
\else
CREATE FUNCTION public.bench_update_only(p_key text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    counted bigint;
BEGIN
    UPDATE ratelimit.key_state SET amount = amount + 1
    WHERE policy = '' AND key = p_key AND algorithm = 1
    RETURNING amount INTO counted;
    RETURN counted;
END
$$;
\endif
