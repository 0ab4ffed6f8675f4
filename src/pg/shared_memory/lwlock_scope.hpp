// Running C++ work under an LWLock (the memory engine's and the leases' partitions).
#pragma once

#include "pg/bridge/guard.hpp"
#include "pg/bridge/postgres.hpp"

extern "C" {
#include "storage/lwlock.h"
}

namespace ratelimit::pg {

// Runs `work()` with `lock` held in `mode` and returns what it returns. Acquiring may raise (it
// runs inside call_postgres); LWLockRelease cannot fail for a lock this backend holds, so it is
// called directly, also when the work throws.
template <typename Work>
auto with_lwlock(LWLock* lock, LWLockMode mode, Work&& work) {
    call_postgres([&] { LWLockAcquire(lock, mode); });
    try {
        auto result = work();
        LWLockRelease(lock);
        return result;
    } catch (...) {
        LWLockRelease(lock);
        throw;
    }
}

}  // namespace ratelimit::pg
