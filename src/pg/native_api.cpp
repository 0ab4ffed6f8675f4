// The native API in schema ratelimit: consume, peek, refund, reset and block on every engine,
// and the memory engine's stats. Arguments are checked in the core (one place, one message per
// argument) before any state is touched; the decision itself is the core's; this file only
// moves a key's state between its engine and the core (src/pg/key_state_table.hpp and
// src/pg/memory_engine.cpp say how each stays exact).
#include <cstdint>
#include <string_view>

#include "pg/arguments.hpp"
#include "pg/clock.hpp"
#include "pg/guard.hpp"
#include "pg/key_state_table.hpp"
#include "pg/memory_engine.hpp"
#include "pg/postgres.hpp"

extern "C" {
#include "utils/typcache.h"
}
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"

namespace ratelimit::pg {
namespace {

// The arguments shared by consume, peek and refund, checked.
struct LimitCall {
    Datum key = 0;
    Limit limit;
    std::int64_t cost = 0;
    Engine engine = Engine::kTable;
};

Engine read_engine(FunctionCallInfo fcinfo, int index) {
    return parse_engine("p_engine", name_argument(fcinfo, index, "p_engine"));
}

LimitCall read_limit_call(FunctionCallInfo fcinfo) {
    LimitCall call;
    call.key = key_argument(fcinfo, 0, "p_key");
    const std::int32_t limit = int32_argument(fcinfo, 1, "p_limit");
    const Micros period = interval_argument(fcinfo, 2, "p_period");
    call.cost = int32_argument(fcinfo, 3, "p_cost");
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 4, "p_algorithm"));
    call.engine = read_engine(fcinfo, 5);
    std::optional<std::int64_t> burst;
    if (!PG_ARGISNULL(6))
        burst = PG_GETARG_INT32(6);
    call.limit = make_limit(algorithm, limit, period, burst);
    require_valid_cost(call.limit, call.cost);
    return call;
}

Micros now_checked() {
    const Micros now = clock_now();
    require_valid_instant(now);
    return now;
}

// What a call site looks up once and keeps for its later calls (in fn_extra, which lives as
// long as the calling expression): the schema the function lives in, where its tables are, and
// the descriptor of the decision row it returns.
struct CallSite {
    Oid schema = InvalidOid;
    TupleDesc decision = nullptr;
};

// Called inside call_postgres().
CallSite* call_site(FunctionCallInfo fcinfo) {
    FmgrInfo* flinfo = fcinfo->flinfo;
    if (flinfo->fn_extra == nullptr) {
        auto* site =
            static_cast<CallSite*>(MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(CallSite)));
        site->schema = get_func_namespace(flinfo->fn_oid);
        flinfo->fn_extra = site;
    }
    return static_cast<CallSite*>(flinfo->fn_extra);
}

Oid calling_schema(FunctionCallInfo fcinfo) {
    Oid schema = InvalidOid;
    call_postgres([&] { schema = call_site(fcinfo)->schema; });
    return schema;
}

KeyState state_of(const StoredKeyRow& row) {
    KeyState state;
    if (!row.found)
        return state;
    state.algorithm = static_cast<Algorithm>(row.algorithm);
    state.instant = row.instant;
    state.amount = row.amount;
    state.carry = row.carry;
    state.blocked_until = row.blocked_until;
    for (int i = 0; i + 1 < row.log_values; i += 2)
        state.log.push_back(LogEntry{row.log[i], row.log[i + 1]});
    return state;
}

// Copies `state` into `row` for writing; the log goes into palloc'd memory.
void store_state(const KeyState& state, Micros expires_at, StoredKeyRow* row) {
    row->algorithm = static_cast<std::int16_t>(state.algorithm);
    row->instant = state.instant;
    row->amount = state.amount;
    row->carry = state.carry;
    row->blocked_until = state.blocked_until;
    row->expires_at = expires_at;
    row->log_values = static_cast<int>(state.log.size() * 2);
    std::int64_t* log = nullptr;
    if (row->log_values > 0) {
        call_postgres([&] {
            log = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * row->log_values));
        });
        for (std::size_t i = 0; i < state.log.size(); ++i) {
            log[2 * i] = state.log[i].at;
            log[2 * i + 1] = state.log[i].units;
        }
    }
    row->log = log;
}

std::int64_t milliseconds_rounded_up(Micros span) {
    return span <= 0 ? 0 : (span + 999) / 1000;
}

Datum decision_datum(FunctionCallInfo fcinfo, const Decision& decision) {
    Datum values[5] = {BoolGetDatum(decision.allowed),
                       Int32GetDatum(static_cast<std::int32_t>(decision.limit)),
                       Int32GetDatum(static_cast<std::int32_t>(decision.remaining)),
                       Int64GetDatum(milliseconds_rounded_up(decision.retry_after)),
                       Int64GetDatum(milliseconds_rounded_up(decision.reset_after))};
    bool nulls[5] = {false, false, false, false, false};
    Datum result = 0;
    call_postgres([&] {
        CallSite* site = call_site(fcinfo);
        // The row's descriptor is built once per call site, blessed (so the row can be read
        // back by its type id) and copied into the call site's memory.
        if (site->decision == nullptr) {
            TupleDesc desc = nullptr;
            if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
                elog(ERROR, "ratelimit: the function must return ratelimit.decision");
            MemoryContext caller = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
            site->decision = BlessTupleDesc(CreateTupleDescCopy(desc));
            MemoryContextSwitchTo(caller);
        }
        result = HeapTupleGetDatum(heap_form_tuple(site->decision, values, nulls));
    });
    return result;
}

const char* action_function(Action action) {
    switch (action) {
        case Action::kConsume:
            return "ratelimit.consume()";
        case Action::kPeek:
            return "ratelimit.peek()";
        case Action::kRefund:
            return "ratelimit.refund()";
    }
    return "ratelimit";
}

Datum limit_call(FunctionCallInfo fcinfo, Action action) {
    const LimitCall call = read_limit_call(fcinfo);
    if (call.engine == Engine::kMemory) {
        require_memory_limit(call.limit);
        const MemoryKey key = memory_key(call.key);
        const Micros now = now_checked();
        return decision_datum(fcinfo, memory_decide(key, call.limit, now, call.cost, action));
    }
    const Oid schema = calling_schema(fcinfo);
    const Micros now = now_checked();
    const bool writing = action != Action::kPeek;

    KeyStateTable table;
    call_postgres([&] {
        open_key_state_table(schema, call.engine, writing, action_function(action), &table);
    });
    // Read, decide, write; again if another transaction wrote the key in between.
    Decision decision;
    for (bool written = false; !written;) {
        StoredKeyRow row;
        call_postgres([&] { read_key_row(table, call.key, writing, &row); });
        KeyState state = state_of(row);
        decision = decide(call.limit, state, now, call.cost, action);
        if (!writing || !decision.state_changed)
            break;
        store_state(state, idle_from(call.limit, state), &row);
        call_postgres([&] { written = write_key_row(table, call.key, row); });
    }
    call_postgres([&] { close_key_state_table(&table); });
    return decision_datum(fcinfo, decision);
}

Datum consume_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kConsume);
}

Datum peek_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kPeek);
}

Datum refund_body(FunctionCallInfo fcinfo) {
    return limit_call(fcinfo, Action::kRefund);
}

Datum reset_body(FunctionCallInfo fcinfo) {
    const Datum key = key_argument(fcinfo, 0, "p_key");
    const Engine engine = read_engine(fcinfo, 1);
    if (engine == Engine::kMemory)
        return BoolGetDatum(memory_reset(memory_key(key)));
    const Oid schema = calling_schema(fcinfo);
    bool existed = false;
    call_postgres([&] {
        KeyStateTable table;
        open_key_state_table(schema, engine, true, "ratelimit.reset()", &table);
        for (;;) {
            StoredKeyRow row;
            read_key_row(table, key, false, &row);
            existed = row.found;
            if (!row.found || delete_key_row(table, row))
                break;
        }
        close_key_state_table(&table);
    });
    return BoolGetDatum(existed);
}

Datum block_body(FunctionCallInfo fcinfo) {
    const Datum key = key_argument(fcinfo, 0, "p_key");
    const Micros duration = interval_argument(fcinfo, 1, "p_duration");
    const Engine engine = read_engine(fcinfo, 2);
    if (engine == Engine::kMemory) {
        const MemoryKey memory = memory_key(key);
        const Micros now = now_checked();
        return TimestampTzGetDatum(to_timestamptz(memory_block(memory, now + duration, now)));
    }
    const Oid schema = calling_schema(fcinfo);
    const Micros now = now_checked();

    KeyStateTable table;
    call_postgres([&] { open_key_state_table(schema, engine, true, "ratelimit.block()", &table); });
    Micros blocked_until = 0;
    for (bool written = false; !written;) {
        StoredKeyRow row;
        call_postgres([&] { read_key_row(table, key, true, &row); });
        KeyState state = state_of(row);
        block_until(state, now + duration);
        blocked_until = state.blocked_until;
        store_state(state, std::max<Micros>(row.expires_at, state.blocked_until), &row);
        call_postgres([&] { written = write_key_row(table, key, row); });
    }
    call_postgres([&] { close_key_state_table(&table); });
    return TimestampTzGetDatum(to_timestamptz(blocked_until));
}

// ratelimit.memory_stats(): one row of the memory engine's counters.
Datum memory_stats_body(FunctionCallInfo fcinfo) {
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

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_consume, ratelimit::pg::consume_body)
RATELIMIT_SQL_FUNCTION(ratelimit_peek, ratelimit::pg::peek_body)
RATELIMIT_SQL_FUNCTION(ratelimit_refund, ratelimit::pg::refund_body)
RATELIMIT_SQL_FUNCTION(ratelimit_reset, ratelimit::pg::reset_body)
RATELIMIT_SQL_FUNCTION(ratelimit_block, ratelimit::pg::block_body)
RATELIMIT_SQL_FUNCTION(ratelimit_memory_stats, ratelimit::pg::memory_stats_body)
