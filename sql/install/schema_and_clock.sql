-- The schema ratelimit and the clock every decision reads.

CREATE SCHEMA ratelimit;
COMMENT ON SCHEMA ratelimit IS 'ratelimit: native API and internals';

-- The instant decisions are made at: the server clock, or ratelimit.test_clock when set.
CREATE FUNCTION ratelimit.clock_now()
RETURNS timestamptz
LANGUAGE c VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'ratelimit_clock_now';
