-- The schema ratelimit and the clock every decision reads.

CREATE SCHEMA ratelimit;
COMMENT ON SCHEMA ratelimit IS 'ratelimit: native API and internals';

-- @begin clock_now
-- The instant decisions are made at: the server clock, or ratelimit.test_clock when set.
CREATE OR REPLACE FUNCTION ratelimit.clock_now()
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_clock_now';
-- @end clock_now
