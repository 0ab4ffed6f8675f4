// Reservations: rate limiting for costs known only afterwards (tokens an answer used, bytes
// sent). A reservation consumes an estimate up front and is settled later with the actual cost:
// the difference is refunded or charged. This table only remembers the open reservations, so
// that a settle knows the key, limit and estimate, and that each is settled at most once.
//
// Layout. One fixed block: a header, then kReservationPartitions runs of slots, each partition
// under its own lock (the caller's), as in the lease table. A reservation's identifier carries
// its partition and slot, and 31 random bits so that it cannot be guessed or outlive its
// reservation: a settle finds the slot directly and checks the identifier it holds.
//
// A slot's life follows the transactions that touch it (the server's side, src/pg/
// reservations.cpp, drives it from transaction callbacks): taken as kPending by the reserving
// transaction, kOpen once it commits (dropped if it rolls back); kSettling while a transaction
// settles it (no one else can), free once that commits, back to what it was if it rolls back.
// An open reservation past its hold time is expired: its slot may be taken again, and a settle
// no longer finds it. Nothing needs doing at expiry: the estimate was charged when it was made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/time.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit {

constexpr int kReservationPartitions = 64;
constexpr std::int64_t kMinReservationCapacity = kReservationPartitions;
// A partition's slots are numbered in 16 bits of the identifier.
constexpr std::int64_t kMaxReservationSlotsPerPartition = 1 << 16;
constexpr std::int64_t kMaxReservationCapacity =
    kReservationPartitions * kMaxReservationSlotsPerPartition;

// How long a reservation may stay open: from a millisecond to a day.
constexpr Micros kMinReservationHold = 1000;
constexpr Micros kMaxReservationHold = 86400LL * kMicrosPerSecond;

enum class ReservationState : std::uint8_t {
    kFree = 0,
    kPending,   // made by a transaction still in progress
    kOpen,      // made; until settled or past its hold time
    kSettling,  // being settled by a transaction still in progress
};

// A policy's name, the key space of a reservation made through it (reserve_policy): at most
// 63 bytes, as ratelimit.policies allows.
constexpr std::size_t kMaxReservationSpaceBytes = 63;

// What a reservation remembers for its settle.
struct Reservation {
    std::uint32_t database = 0;  // the database and role that made it; only they may settle
    std::uint32_t role = 0;
    Engine engine = Engine::kTable;
    Limit limit;
    std::int64_t estimate = 0;
    Micros expires_at = 0;
    std::uint16_t key_length = 0;
    char key[kMaxKeyBytes] = {};
    // The key space: empty for a native key (reserve), else the policy's name, and `key` the
    // policy's subject as its counter holds it (hashed when the policy has hash_key).
    std::uint8_t space_length = 0;
    char space[kMaxReservationSpaceBytes] = {};

    std::string_view key_text() const noexcept { return std::string_view(key, key_length); }
    std::string_view space_text() const noexcept { return std::string_view(space, space_length); }
};
static_assert(std::is_trivially_copyable<Reservation>::value, "a reservation is plain data");

struct ReservationSlot {
    std::uint64_t id = 0;       // 0: free
    std::uint64_t session = 0;  // the session whose transaction holds it pending or settling
    ReservationState state = ReservationState::kFree;
    Reservation reservation;
};

class ReservationTable {
  public:
    // Slots for `capacity` reservations in all (kMinReservationCapacity..
    // kMaxReservationCapacity), spread evenly over the partitions.
    static std::size_t bytes_needed(std::int64_t capacity) noexcept;
    static ReservationTable create(void* block, std::int64_t capacity) noexcept;
    static ReservationTable attach(void* block) noexcept;

    std::int64_t capacity() const noexcept;
    // The partition an identifier names, or -1 if it cannot be one of this table's.
    int partition_of(std::uint64_t id) const noexcept;

    // ---- the caller holds the partition's lock ----

    // Takes a free slot (or an expired reservation's) as kPending for `session`, with an empty
    // reservation (fill() completes it); returns its identifier, or 0 when the partition is
    // full. `random` supplies the identifier's unguessable bits.
    std::uint64_t take(int partition, Micros now, std::uint64_t session,
                       std::uint32_t random) noexcept;

    // Completes pending reservation `id` of `session`; false if it is not that.
    bool fill(int partition, std::uint64_t id, std::uint64_t session,
              const Reservation& reservation) noexcept;

    // Starts settling reservation `id` for `session`: it must be open and not past its hold
    // time at `now` (or pending in `session`'s own transaction), and made in `database` by
    // `role`. Copies it to `*reservation` and its state before to `*previous`, and marks it
    // kSettling. False, changing nothing, in every other case alike.
    bool claim(int partition, std::uint64_t id, std::uint32_t database, std::uint32_t role,
               Micros now, std::uint64_t session, Reservation* reservation,
               ReservationState* previous) noexcept;

    // The end of `session`'s transaction that took or claimed `id`: a pending reservation is
    // open from now on, a settled one is gone. Nothing if `session` holds no such slot.
    void commit(int partition, std::uint64_t id, std::uint64_t session) noexcept;

    // Its rollback: the slot goes back to `previous` (kFree: the reservation never was).
    void roll_back(int partition, std::uint64_t id, std::uint64_t session,
                   ReservationState previous) noexcept;

    // Open (and not expired at `now`), pending and settling reservations in the partition.
    std::int64_t live(int partition, Micros now) const noexcept;

  private:
    struct Header;
    explicit ReservationTable(void* block) noexcept;
    ReservationSlot* partition_slots(int partition) const noexcept;
    ReservationSlot* slot_of(int partition, std::uint64_t id) const noexcept;

    Header* header_ = nullptr;
    ReservationSlot* slots_ = nullptr;
};

// Whether a slot holds a reservation at `now`: any but an open one past its hold time.
inline bool reservation_live(const ReservationSlot& slot, Micros now) noexcept {
    return slot.id != 0 &&
           (slot.state != ReservationState::kOpen || now < slot.reservation.expires_at);
}

}  // namespace ratelimit
