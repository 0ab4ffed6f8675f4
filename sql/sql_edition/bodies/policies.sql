-- The SQL edition's bodies of the C functions of sql/install/policies.sql.

-- The C edition keeps each backend's copy of the policy tables and drops it when they change;
-- the SQL edition reads the tables on every call and keeps no copy: nothing to drop.
-- @begin ratelimit_policy_tables_changed
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN NULL;
END
$$;
-- @end ratelimit_policy_tables_changed
