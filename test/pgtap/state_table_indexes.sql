-- The table engines write key_state and key_state_unlogged rows with the heap and index
-- functions. An index the owner adds stays exact (an index scan finds what a sequential scan
-- finds, and amcheck finds every row in every index); what those writes cannot honour (a
-- trigger, a check constraint, a deferrable unique index) makes a writing call fail with
-- SQLSTATE 55000 before anything is written.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION ratelimit;
CREATE EXTENSION IF NOT EXISTS amcheck;

SELECT plan(30);

\set tbl key_state
\set engine table
\ir state_table_indexes.psql

\set tbl key_state_unlogged
\set engine unlogged
\ir state_table_indexes.psql

SELECT * FROM finish();
ROLLBACK;
