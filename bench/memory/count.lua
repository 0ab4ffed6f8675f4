-- Reads a Redis key set back (ARGV[1]: a KEYS pattern): {keys, sum of their counts, keys
-- without an expiry}. bench/memory.sh compares the sum with the calls it made on the set; a
-- key without an expiry would mean that EXPIRE was not run.
local keys = redis.call('KEYS', ARGV[1])
local sum, persistent = 0, 0
for _, key in ipairs(keys) do
    sum = sum + tonumber(redis.call('GET', key))
    if redis.call('PTTL', key) < 0 then persistent = persistent + 1 end
end
return {#keys, sum, persistent}
