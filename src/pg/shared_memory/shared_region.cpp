#include "pg/shared_memory/shared_region.hpp"

#include <cctype>
#include <stdexcept>
#include <string>

#include "pg/bridge/guard.hpp"

extern "C" {
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
}

namespace ratelimit::pg {
namespace {

SharedRegion* installed = nullptr;
shmem_request_hook_type previous_shmem_request_hook = nullptr;
shmem_startup_hook_type previous_shmem_startup_hook = nullptr;

}  // namespace

std::size_t SharedRegion::header_bytes() noexcept {
    return MAXALIGN(sizeof(Header));
}

void SharedRegion::install() {
    if (installed == nullptr) {
        previous_shmem_request_hook = shmem_request_hook;
        shmem_request_hook = request_all;
        previous_shmem_startup_hook = shmem_startup_hook;
        shmem_startup_hook = start_all;
    }
    next_ = installed;
    installed = this;
}

void SharedRegion::request_all() {
    if (previous_shmem_request_hook != nullptr)
        previous_shmem_request_hook();
    for (const SharedRegion* region = installed; region != nullptr; region = region->next_)
        region->request();
}

void SharedRegion::start_all() {
    if (previous_shmem_startup_hook != nullptr)
        previous_shmem_startup_hook();
    for (SharedRegion* region = installed; region != nullptr; region = region->next_)
        region->start();
}

void SharedRegion::request() const {
    RequestAddinShmemSpace(bytes());
    RequestNamedLWLockTranche(name_, partitions_);
}

void SharedRegion::start() {
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    header_ = static_cast<Header*>(ShmemInitStruct(name_, bytes(), &found));
    if (!found) {
        header_->locks = GetNamedLWLockTranche(name_);
        create_(table());
    }
    LWLockRelease(AddinShmemInitLock);
    if (started_ != nullptr)
        started_(table(), !found);
}

void* SharedRegion::table() const noexcept {
    return reinterpret_cast<char*>(header_) + header_bytes();
}

void SharedRegion::require_available() const {
    if (available())
        return;
    std::string detail = what_;
    detail[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(detail[0])));
    detail += " live in shared memory, which only a library loaded at server start can set up.";
    call_postgres([&] {
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ratelimit: %s are not available: ratelimit is not in "
                               "shared_preload_libraries",
                               what_),
                        errdetail("%s", detail.c_str()),
                        errhint("Add ratelimit to shared_preload_libraries in postgresql.conf and "
                                "restart the server.")));
    });
    throw std::logic_error("unreachable");
}

}  // namespace ratelimit::pg
