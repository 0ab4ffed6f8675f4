-- The PL/pgSQL floor on the table engine: one UPDATE of a key's row (consume_table_10k's keys),
-- nothing checked or decided (setup.sql's bench_update_only, in the SQL edition's database).
\set k random(1, 10000)
SELECT public.bench_update_only('bench-' || :k);
