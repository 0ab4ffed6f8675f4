-- The first call of every key of a Redis key set, as fixed_window.lua would make it, so the
-- measured runs find every key in place, like the memory engine's (populate.sql). Keys are
-- ARGV[1] followed by 0 .. ARGV[2] - 1 on 12 digits, as redis-benchmark writes __rand_int__.
-- ARGV[3]: the window in seconds. Returns how many keys were created.
local created = 0
for i = 0, tonumber(ARGV[2]) - 1 do
    local key = ARGV[1] .. string.format('%012d', i)
    if redis.call('INCR', key) == 1 then
        redis.call('EXPIRE', key, ARGV[3])
        created = created + 1
    end
end
return created
