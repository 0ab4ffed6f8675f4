-- Shared by the pg_regress tests that follow (they run in order in one database).

-- Runs a statement and reports its SQLSTATE and message instead of failing the script, so a
-- test shows both what was refused and with which code.
CREATE FUNCTION error_of(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
