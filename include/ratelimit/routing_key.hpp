// The text a sharded key is routed by (ratelimit_router): its hash tag, as Redis Cluster reads
// one, so that keys decided together can be put on one shard ('cart:{user-7}' and
// 'checkout:{user-7}' share the tag 'user-7').
#pragma once

#include <string_view>

namespace ratelimit {

// The text between the key's first '{' and the first '}' after it, when that text is not empty;
// else the whole key. Bytes are compared, which is exact in UTF-8 (no other character contains
// the bytes of '{' or '}').
std::string_view routing_key(std::string_view key) noexcept;

}  // namespace ratelimit
