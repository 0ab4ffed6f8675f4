// The identity of a rate-limit key in the shared-memory store: SipHash-2-4 with 128-bit output
// (SipHash128), keyed with a secret generated at start-up. Keys are chosen by callers, so an
// unkeyed hash would let anyone craft colliding keys; SipHash is a pseudorandom function, so
// without the secret collisions cannot be found faster than by chance (2^-128 per pair).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ratelimit {

// A key's identity in the memory store: the 16 output bytes of SipHash128, the first 8 read
// little-endian into `low` and the next 8 into `high`.
struct KeyHash {
    std::uint64_t high = 0;
    std::uint64_t low = 0;

    bool operator==(const KeyHash& other) const noexcept {
        return high == other.high && low == other.low;
    }
    bool operator!=(const KeyHash& other) const noexcept { return !(*this == other); }
};

// The 128-bit SipHash key: k0 is the first 8 key bytes read little-endian, k1 the next 8.
struct HashSecret {
    std::uint64_t k0 = 0;
    std::uint64_t k1 = 0;
};

// SipHash-2-4 with 128-bit output of the `length` bytes at `data` (which may be null when
// `length` is 0). The length is part of the input, so keys that differ only by trailing zero
// bytes hash differently.
KeyHash hash_key(const HashSecret& secret, const void* data, std::size_t length) noexcept;

}  // namespace ratelimit
