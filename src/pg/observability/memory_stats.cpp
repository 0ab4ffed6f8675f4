// The memory engine's counters as SQL: ratelimit.memory_stats() for the whole store and
// ratelimit.memory_stats_by_database() for each database's keys, refusals and evictions.
// The current memory_stats() is ratelimit_memory_store_stats, not named after its function: the
// 0.4.0 and 0.5.0 definitions of memory_stats, of seven columns, hold the name
// ratelimit_memory_stats, which still answers them below.
#include <cstdint>
#include <vector>

#include "pg/bridge/guard.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/engines/memory_wal.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/result_row.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "utils/acl.h"
}

namespace ratelimit::pg {
namespace {

// ratelimit.memory_stats() of 0.4.0 and 0.5.0: the first seven columns of today's.
Datum memory_stats_0_4_body(FunctionCallInfo fcinfo) {
    std::int64_t shared_bytes = 0;
    const MemoryStats stats = memory_stats(&shared_bytes);
    Datum values[7] = {Int64GetDatum(stats.entries), Int64GetDatum(stats.capacity),
                       Int64GetDatum(shared_bytes),  Int64GetDatum(stats.evictions),
                       Int64GetDatum(stats.expired), Int64GetDatum(stats.allowed),
                       Int64GetDatum(stats.denied)};
    bool nulls[7] = {false, false, false, false, false, false, false};
    Datum result = 0;
    call_postgres([&] {
        TupleDesc desc = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "ratelimit: memory_stats must return a row");
        desc = BlessTupleDesc(desc);
        result = HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
    });
    return result;
}

// ratelimit.memory_stats(): one row of the whole store's counters.
Datum memory_store_stats_body(FunctionCallInfo fcinfo) {
    std::int64_t shared_bytes = 0;
    const MemoryStats stats = memory_stats(&shared_bytes);
    const MemoryWalStatus wal = memory_wal_status();
    // 0.6.0's definition has the first 11 columns: a row is formed of as many as it declares.
    constexpr int kColumns = 13;
    Datum values[kColumns] = {
        Int64GetDatum(stats.entries),         Int64GetDatum(stats.capacity),
        Int64GetDatum(shared_bytes),          Int64GetDatum(stats.evictions),
        Int64GetDatum(stats.expired),         Int64GetDatum(stats.allowed),
        Int64GetDatum(stats.denied),          Int64GetDatum(stats.refusals),
        Int64GetDatum(stats.full_partitions), Int64GetDatum(stats.log_blocks),
        Int64GetDatum(stats.log_blocks_used), BoolGetDatum(wal.worker_running),
        Int64GetDatum(wal.replay_unplaced)};
    bool nulls[kColumns] = {};
    nulls[11] = !wal.enabled;
    Datum result = 0;
    call_postgres([&] {
        TupleDesc desc = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "ratelimit: memory_stats must return a row");
        desc = BlessTupleDesc(desc);
        result = HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
    });
    return result;
}

// ratelimit.memory_stats_by_database(): a row per database the store has seen. A database's
// counts say how busy it is, so a caller without pg_read_all_stats sees its own row only, as
// with pg_stat_activity.
Datum memory_stats_by_database_body(FunctionCallInfo fcinfo) {
    std::vector<MemoryDatabaseStats> rows(kMaxMemoryDatabases);
    std::int64_t share_limit = 0;
    const int count = memory_database_stats(rows.data(), &share_limit);
    bool see_all = false;
    TupleDesc desc = nullptr;
    Tuplestorestate* store = nullptr;
    call_postgres([&] {
        see_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
        store = begin_result_rows(fcinfo, &desc);
    });
    for (int i = 0; i < count; ++i) {
        const MemoryDatabaseStats& row = rows[static_cast<std::size_t>(i)];
        if (!see_all && row.oid != MyDatabaseId)
            continue;
        constexpr int kColumns = 6;
        Datum values[kColumns] = {0,
                                  ObjectIdGetDatum(row.oid),
                                  Int64GetDatum(row.entries),
                                  Int64GetDatum(share_limit),
                                  Int64GetDatum(row.refusals),
                                  Int64GetDatum(row.evictions)};
        bool nulls[kColumns] = {};
        call_postgres([&] {
            // A dropped database (or the row shared by databases beyond the table) has no name.
            char* name = row.oid == InvalidOid ? nullptr : get_database_name(row.oid);
            if (name == nullptr)
                nulls[0] = true;
            else
                values[0] = DirectFunctionCall1(namein, CStringGetDatum(name));
            if (row.oid == InvalidOid)
                nulls[1] = true;
            tuplestore_putvalues(store, desc, values, nulls);
        });
    }
    return static_cast<Datum>(0);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_memory_store_stats, ratelimit::pg::memory_store_stats_body)
RATELIMIT_SQL_FUNCTION(ratelimit_memory_stats_by_database,
                       ratelimit::pg::memory_stats_by_database_body)
RATELIMIT_SQL_FUNCTION(ratelimit_memory_stats, ratelimit::pg::memory_stats_0_4_body)
