-- The Redis side of the comparison: the usual fixed-window limiter, as one server-side script
-- so that it is one round trip like one ratelimit.consume call. INCR the key's counter; when
-- the count becomes 1 the window has just opened, so EXPIRE sets its length; the call is
-- allowed while the count is within the limit (denied calls count too, unlike the extension's,
-- which never happens here: every call is allowed). Returns {allowed, remaining}.
-- KEYS[1]: the key; ARGV[1]: the limit; ARGV[2]: the window in seconds.
-- bench/memory.sh sends the script without these comment lines (EVAL sends it on every call).
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
local limit = tonumber(ARGV[1])
if count > limit then return {0, 0} end
return {1, limit - count}
