// A block of shared memory that the preloaded library sets up at server start, with one LWLock
// per partition of the table it holds: the memory engine's store, the policy counters, the
// denial queue, the leases' and the reservations' registries. Every region is requested and
// started by one pair of hooks, chained once (src/pg/shared_memory/shared_region.cpp): no other
// file installs a shared-memory hook. A restart, or a crash, makes each region anew.
#pragma once

#include <cstddef>

#include "pg/shared_memory/lwlock_scope.hpp"
#include "pg/bridge/postgres.hpp"

extern "C" {
#include "storage/lwlock.h"
}

namespace ratelimit::pg {

class SharedRegion {
  public:
    using TableBytes = std::size_t (*)();
    using CreateTable = void (*)(void* block);
    // Runs after the block is set up, in each process that sets it up (the postmaster, and
    // with EXEC_BACKEND every backend): `created` when this call laid the table out.
    using Started = void (*)(void* block, bool created);

    // `name` names the block and its lock tranche; `what` is what it holds, as the error for a
    // library that was not preloaded says it ("leases", "reservations"). `table_bytes` is read
    // once the settings are known; `create` lays out an empty table, once, in the postmaster;
    // `started`, if given, runs once the block is there (the lock released).
    SharedRegion(const char* name, int partitions, const char* what, TableBytes table_bytes,
                 CreateTable create, Started started = nullptr) noexcept
        : name_(name),
          partitions_(partitions),
          what_(what),
          table_bytes_(table_bytes),
          create_(create),
          started_(started) {}

    // From _PG_init while the library is being preloaded: the region is requested and set up
    // with the server's shared memory (the shmem hooks, chained once for all regions).
    void install();

    bool available() const noexcept { return header_ != nullptr; }
    // Throws the error for a library that was not preloaded (55000) unless available().
    void require_available() const;

    void* table() const noexcept;
    // The shared memory the region takes: its locks' header and its table.
    std::size_t bytes() const noexcept { return header_bytes() + table_bytes_(); }
    LWLock* lock(int partition) const noexcept { return &header_->locks[partition].lock; }

    // Runs `work(Table&)` on the table under `partition`'s lock, held exclusively.
    template <typename Table, typename Work>
    auto with_partition(int partition, Work&& work) const {
        return with_lwlock(lock(partition), LW_EXCLUSIVE, [&] {
            Table table = Table::attach(this->table());
            return work(table);
        });
    }

  private:
    struct Header {
        LWLockPadded* locks;
        // the table follows, MAXALIGNed
    };
    static std::size_t header_bytes() noexcept;
    static void request_all();
    static void start_all();
    void request() const;
    void start();

    const char* name_;
    int partitions_;
    const char* what_;
    TableBytes table_bytes_;
    CreateTable create_;
    Started started_;
    Header* header_ = nullptr;
    SharedRegion* next_ = nullptr;  // the regions installed, a list for the hooks
};

}  // namespace ratelimit::pg
