// The pk parameter of the IETF RateLimit fields: an identifier of the counter a response counts
// against, which a client can compare across responses but never turn back into the subject.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ratelimit {

// SHA-256 (FIPS 180-4) of the `length` bytes at `data` (which may be null when `length` is 0).
std::array<std::uint8_t, 32> sha256(const void* data, std::size_t length) noexcept;

// Secrets shorter than this give no partition key.
constexpr std::size_t kPartitionSecretMinBytes = 16;
// The bytes of a partition key.
constexpr std::size_t kPartitionKeyBytes = 12;

// The first kPartitionKeyBytes of SHA-256 over the secret, the policy's name, a zero byte and
// the subject as given; nothing when the secret is shorter than kPartitionSecretMinBytes.
//
// A keyed hash of this shape with its output cut short is a pseudorandom function (AMAC:
// Bellare, Bernstein and Tessaro, 2016): the 96 bits shown leave 160 bits of the hash's state
// unknown, so no one without the secret can extend, forge or invert it. SHA-256 is also what
// PostgreSQL computes in SQL (sha256()), so the SQL edition gives every subject the same key.
// The name keeps one subject's keys apart across policies.
std::optional<std::string> partition_key(std::string_view secret, std::string_view policy,
                                         std::string_view subject);

}  // namespace ratelimit
