// Top offenders: the (policy, subject) pairs denied most often, kept in a fixed table of
// kOffenderSlots entries (shared memory, in the server) with the space-saving algorithm: a pair
// already in the table counts up; a new pair takes a free entry, or else replaces the entry
// with the fewest denials and inherits its count as a possible overcount. Every pair denied
// more than (all denials / kOffenderSlots) times is guaranteed to be in the table, and each
// entry's true count lies between `denials - overcount` and `denials`.
//
// Each entry belongs to one database: a database reads and clears only its own entries, and
// holds at most `database_share` of them. A newcomer of a database at its share replaces that
// database's own entry with the fewest denials, so one database's flood of denials never pushes
// another's offenders out; under its share it takes a free entry, or the fewest-denied entry of
// any database. The bound above then holds within a database's share: every pair of it denied
// more than (its denials / its entries) times is in the table.
//
// Locking is the caller's: record() and snapshot() need the table's lock (exclusive, shared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ratelimit/time.hpp"

namespace ratelimit {

constexpr int kOffenderSlots = 128;
constexpr std::size_t kOffenderPolicyBytes = 63;    // policy names are at most this long
constexpr std::size_t kOffenderSubjectBytes = 256;  // kMaxKeyBytes

struct OffenderSlot {
    std::int64_t denials;  // 0: free
    std::int64_t overcount;
    Micros first_at;
    Micros last_at;
    std::uint32_t database;
    std::uint16_t policy_bytes;
    std::uint16_t subject_bytes;
    char policy[kOffenderPolicyBytes];
    char subject[kOffenderSubjectBytes];
};

struct Offender {
    std::string_view policy;
    std::string_view subject;
    std::int64_t denials = 0;
    std::int64_t overcount = 0;
    Micros first_at = 0;
    Micros last_at = 0;
};

// The longest prefix of `text` of at most `max_bytes` that does not cut a UTF-8 character.
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) noexcept;

class OffenderTable {
  public:
    static constexpr std::size_t kBytes = sizeof(OffenderSlot) * kOffenderSlots;

    // `slots` points at kOffenderSlots slots, zeroed (all free) before first use.
    explicit OffenderTable(OffenderSlot* slots) noexcept : slots_(slots) {}

    // Counts one denial of `subject` under `policy` (both cut to their maximum length) in
    // `database`, which may hold at most `database_share` entries (at least 1).
    void record(std::string_view policy, std::string_view subject, Micros now,
                std::uint32_t database = 0, int database_share = kOffenderSlots) noexcept;

    // The entries of `database` in use, most denials first; the views point into the table.
    std::vector<Offender> snapshot(std::uint32_t database = 0) const;

    // Frees every entry.
    void clear() noexcept;

    // Frees the entries of `database` only.
    void clear(std::uint32_t database) noexcept;

  private:
    OffenderSlot* slots_;
};

}  // namespace ratelimit
