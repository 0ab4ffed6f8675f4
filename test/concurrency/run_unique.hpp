// Keys no earlier run can have used. The memory engine's store and the policy counters live in
// shared memory for the server's lifetime, so a test that meets a key again would not start
// fresh: tests that use them put this in their keys.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace ratelimit_test {

// 16 hex digits from the random device and the clock.
inline std::string run_unique_hex() {
    std::random_device device;
    const std::uint64_t random =
        (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(random));
    return hex;
}

}  // namespace ratelimit_test
