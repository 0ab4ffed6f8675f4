// The native API in schema ratelimit: consume, peek, refund, reset and block on every engine,
// and the memory engine's stats. Arguments are checked in the core (one place, one message per
// argument) before any state is touched; the decision itself is the core's; this file only
// moves a key's state between its engine and the core (src/pg/key_state_table.hpp and
// src/pg/memory_engine.cpp say how each stays exact).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/arguments.hpp"
#include "pg/clock.hpp"
#include "pg/guard.hpp"
#include "pg/key_state_table.hpp"
#include "pg/memory_engine.hpp"
#include "pg/postgres.hpp"

extern "C" {
#include "utils/array.h"
#include "utils/resowner.h"
#include "utils/typcache.h"
}
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

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
        // back by its type id) and copied into the call site's memory. A function returning
        // ratelimit.decision[] gets its element type's descriptor.
        if (site->decision == nullptr) {
            const Oid element = get_element_type(get_func_rettype(fcinfo->flinfo->fn_oid));
            MemoryContext caller = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
            TupleDesc desc = nullptr;
            if (OidIsValid(element)) {
                desc = lookup_rowtype_tupdesc_copy(element, -1);
            } else if (get_call_result_type(fcinfo, nullptr, &desc) == TYPEFUNC_COMPOSITE) {
                desc = CreateTupleDescCopy(desc);
            } else {
                elog(ERROR, "ratelimit: the function must return ratelimit.decision");
            }
            site->decision = BlessTupleDesc(desc);
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

// ---- consume_all: several limits decided as one --------------------------------------------

// More tiers would only hold more partition locks at once; real checks use two to four.
constexpr int kMaxTiers = 16;

// One array argument, deconstructed: `values` and `nulls` live in the call's memory.
struct ArrayArgument {
    Datum* values = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    bool given = false;
};

ArrayArgument array_argument(FunctionCallInfo fcinfo, int index, const char* name, Oid element,
                             bool required) {
    ArrayArgument array;
    if (PG_ARGISNULL(index)) {
        if (required)
            throw ArgumentError::null(name);
        return array;
    }
    array.given = true;
    int dimensions = 0;
    call_postgres([&] {
        ArrayType* value = PG_GETARG_ARRAYTYPE_P(index);
        dimensions = ARR_NDIM(value);
        if (dimensions <= 1) {
            int16 length = 0;
            bool by_value = false;
            char align = 0;
            get_typlenbyvalalign(element, &length, &by_value, &align);
            deconstruct_array(value, element, length, by_value, align, &array.values, &array.nulls,
                              &array.count);
        }
    });
    if (dimensions > 1)
        throw ArgumentError::invalid(name, "must be a one-dimensional array");
    return array;
}

// The element's name in messages: p_limits[2] for the second limit (SQL arrays count from 1).
std::string element_name(const char* array, int index) {
    return std::string(array) + "[" + std::to_string(index + 1) + "]";
}

// Re-raises a core error about a scalar argument (p_limit) as one about the array element it
// came from (p_limits[2]), keeping the rest of the message.
[[noreturn]] void rethrow_for_element(const ArgumentError& error, int index) {
    static const std::pair<const char*, const char*> kArrays[] = {
        {"p_key", "p_keys"},     {"p_limit", "p_limits"},         {"p_period", "p_periods"},
        {"p_burst", "p_bursts"}, {"p_algorithm", "p_algorithms"}, {"p_engine", "p_engines"}};
    for (const auto& [scalar, array] : kArrays) {
        if (error.argument() == scalar) {
            const std::string name = element_name(array, index);
            const std::string detail = std::string(error.what()).substr(error.argument().size());
            throw ArgumentError(error.kind(), name, name + detail);
        }
    }
    throw error;
}

struct Tier {
    Datum key = 0;  // a text datum
    Limit limit;
    Engine engine = Engine::kTable;
    bool enforced = true;
    Decision before;  // the tier as it stands, before this call charges anything
    Decision result;  // what the call did to it, when `charged`
    bool charged = false;
};

std::string_view text_bytes(Datum value) {
    const text* t = reinterpret_cast<const text*>(DatumGetPointer(value));
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

std::vector<Tier> read_tiers(FunctionCallInfo fcinfo, std::int64_t* cost) {
    const ArrayArgument keys = array_argument(fcinfo, 0, "p_keys", TEXTOID, true);
    const ArrayArgument limits = array_argument(fcinfo, 1, "p_limits", INT4OID, true);
    const ArrayArgument periods = array_argument(fcinfo, 2, "p_periods", INTERVALOID, true);
    const ArrayArgument algorithms = array_argument(fcinfo, 3, "p_algorithms", TEXTOID, false);
    const ArrayArgument engines = array_argument(fcinfo, 4, "p_engines", TEXTOID, false);
    const ArrayArgument bursts = array_argument(fcinfo, 5, "p_bursts", INT4OID, false);
    const ArrayArgument enforced = array_argument(fcinfo, 6, "p_enforced", BOOLOID, false);
    *cost = int32_argument(fcinfo, 7, "p_cost");

    const int count = keys.count;
    if (count < 1 || count > kMaxTiers)
        throw ArgumentError::invalid("p_keys", "must have 1 to " + std::to_string(kMaxTiers) +
                                                   " elements (got " + std::to_string(count) + ")");
    const std::pair<const char*, const ArrayArgument*> same_length[] = {
        {"p_limits", &limits},   {"p_periods", &periods}, {"p_algorithms", &algorithms},
        {"p_engines", &engines}, {"p_bursts", &bursts},   {"p_enforced", &enforced}};
    for (const auto& [name, array] : same_length) {
        if (array->given && array->count != count)
            throw ArgumentError::invalid(name, "must have as many elements as p_keys (" +
                                                   std::to_string(count) + ", got " +
                                                   std::to_string(array->count) + ")");
    }

    std::vector<Tier> tiers(count);
    for (int i = 0; i < count; ++i) {
        Tier& tier = tiers[i];
        try {
            if (keys.nulls[i])
                throw ArgumentError::null("p_key");
            if (limits.nulls[i])
                throw ArgumentError::null("p_limit");
            if (periods.nulls[i])
                throw ArgumentError::null("p_period");
            call_postgres(
                [&] { tier.key = PointerGetDatum(PG_DETOAST_DATUM_PACKED(keys.values[i])); });
            require_key("p_key", text_bytes(tier.key).size());
            const Interval* span = DatumGetIntervalP(periods.values[i]);
            const Micros period = interval_length("p_period", span->month, span->day, span->time);
            Algorithm algorithm = Algorithm::kFixedWindow;
            if (algorithms.given) {
                if (algorithms.nulls[i])
                    throw ArgumentError::null("p_algorithm");
                algorithm = parse_algorithm("p_algorithm", text_bytes(algorithms.values[i]));
            }
            if (engines.given) {
                if (engines.nulls[i])
                    throw ArgumentError::null("p_engine");
                tier.engine = parse_engine("p_engine", text_bytes(engines.values[i]));
            }
            std::optional<std::int64_t> burst;
            if (bursts.given && !bursts.nulls[i])
                burst = DatumGetInt32(bursts.values[i]);
            tier.limit = make_limit(algorithm, DatumGetInt32(limits.values[i]), period, burst);
            if (tier.engine == Engine::kMemory)
                require_memory_limit(tier.limit);
        } catch (const ArgumentError& error) {
            rethrow_for_element(error, i);
        }
        if (enforced.given) {
            if (enforced.nulls[i])
                throw ArgumentError::null(element_name("p_enforced", i));
            tier.enforced = DatumGetBool(enforced.values[i]);
        }
        try {
            require_valid_cost(tier.limit, *cost);
        } catch (const ArgumentError& error) {
            throw ArgumentError(
                error.kind(), "p_cost",
                std::string(error.what()) + " (for " + element_name("p_keys", i) + ")");
        }
        for (int j = 0; j < i; ++j) {
            if (tiers[j].engine == tier.engine && text_bytes(tiers[j].key) == text_bytes(tier.key))
                throw ArgumentError::invalid(element_name("p_keys", i),
                                             "repeats p_keys[" + std::to_string(j + 1) +
                                                 "] on the same engine: each key may appear once");
        }
    }
    return tiers;
}

// The table tiers of one call, decided inside a subtransaction so that a denial anywhere can
// undo what the earlier tiers charged. Keys are taken in (engine, key) order, so two calls
// over the same keys lock their rows in the same order and cannot deadlock.
class TableTiers {
  public:
    TableTiers(FunctionCallInfo fcinfo, std::vector<Tier>& tiers) : fcinfo_(fcinfo) {
        for (Tier& tier : tiers) {
            if (tier.engine != Engine::kMemory)
                tiers_.push_back(&tier);
        }
        std::sort(tiers_.begin(), tiers_.end(), [](const Tier* a, const Tier* b) {
            if (a->engine != b->engine)
                return a->engine < b->engine;
            return text_bytes(a->key) < text_bytes(b->key);
        });
    }

    bool empty() const { return tiers_.empty(); }

    // Charges every table tier that allows; true if every enforced one did.
    bool consume(Micros now, std::int64_t cost) {
        const Oid schema = calling_schema(fcinfo_);
        call_postgres([&] {
            caller_context_ = CurrentMemoryContext;
            caller_owner_ = CurrentResourceOwner;
            BeginInternalSubTransaction(nullptr);
            MemoryContextSwitchTo(caller_context_);
        });
        open_ = true;
        bool allowed = true;
        for (Engine engine : {Engine::kTable, Engine::kUnlogged}) {
            KeyStateTable table;
            bool opened = false;
            for (Tier* tier : tiers_) {
                if (tier->engine != engine)
                    continue;
                if (!opened) {
                    call_postgres([&] {
                        open_key_state_table(schema, engine, true, "ratelimit.consume_all()",
                                             &table);
                    });
                    opened = true;
                }
                decide_tier(table, *tier, now, cost);
                if (tier->enforced && !tier->before.allowed)
                    allowed = false;
            }
            if (opened)
                call_postgres([&] { close_key_state_table(&table); });
        }
        return allowed;
    }

    // Ends the subtransaction: keeps what it charged, or undoes all of it.
    void finish(bool keep) {
        if (!open_)
            return;
        open_ = false;
        call_postgres([&] {
            if (keep)
                ReleaseCurrentSubTransaction();
            else
                RollbackAndReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(caller_context_);
            CurrentResourceOwner = caller_owner_;
        });
        if (!keep) {
            for (Tier* tier : tiers_)
                tier->charged = false;
        }
    }

    // On an error: the subtransaction must be gone before the error travels on, or whoever
    // catches it would roll back ours instead of theirs.
    void abandon() noexcept {
        if (!open_)
            return;
        open_ = false;
        try {
            call_postgres([&] {
                RollbackAndReleaseCurrentSubTransaction();
                MemoryContextSwitchTo(caller_context_);
                CurrentResourceOwner = caller_owner_;
            });
        } catch (...) {
            // The error already in flight is the one to report; the transaction aborts anyway.
        }
    }

  private:
    static void decide_tier(const KeyStateTable& table, Tier& tier, Micros now, std::int64_t cost) {
        for (bool written = false; !written;) {
            StoredKeyRow row;
            call_postgres([&] { read_key_row(table, tier.key, true, &row); });
            KeyState state = state_of(row);
            KeyState unchanged = state;
            tier.before = decide(tier.limit, unchanged, now, cost, Action::kPeek);
            if (!tier.before.allowed)
                return;
            tier.result = decide(tier.limit, state, now, cost, Action::kConsume);
            tier.charged = true;
            if (!tier.result.state_changed)
                return;
            store_state(state, idle_from(tier.limit, state), &row);
            call_postgres([&] { written = write_key_row(table, tier.key, row); });
        }
    }

    FunctionCallInfo fcinfo_;
    std::vector<Tier*> tiers_;
    bool open_ = false;
    MemoryContext caller_context_ = nullptr;
    ResourceOwner caller_owner_ = nullptr;
};

bool consume_memory_tiers(std::vector<Tier>& tiers, Micros now, std::int64_t cost, bool charge) {
    std::vector<MemoryTierCall> calls;
    std::vector<Tier*> owners;
    for (Tier& tier : tiers) {
        if (tier.engine != Engine::kMemory)
            continue;
        MemoryTierCall call;
        call.key = memory_key(tier.key);
        call.limit = tier.limit;
        call.enforced = tier.enforced;
        calls.push_back(call);
        owners.push_back(&tier);
    }
    if (calls.empty())
        return true;
    const bool allowed =
        memory_consume_all(calls.data(), static_cast<int>(calls.size()), now, cost, charge);
    for (std::size_t i = 0; i < calls.size(); ++i) {
        owners[i]->before = calls[i].before;
        owners[i]->result = calls[i].result;
        owners[i]->charged = calls[i].charged;
    }
    return allowed;
}

// ratelimit.consume_all(): see sql/ratelimit--0.4.0--0.5.0.sql.
Datum consume_all_body(FunctionCallInfo fcinfo) {
    std::int64_t cost = 0;
    std::vector<Tier> tiers = read_tiers(fcinfo, &cost);
    const Micros now = now_checked();

    TableTiers table_tiers(fcinfo, tiers);
    bool allowed = true;
    try {
        if (!table_tiers.empty())
            allowed = table_tiers.consume(now, cost);
        // The memory tiers are decided last: they cannot be undone, so they are charged only
        // once the table tiers have allowed, and the table tiers are undone if a memory tier
        // denies. After a table denial they are only looked at, for the report.
        allowed = consume_memory_tiers(tiers, now, cost, allowed) && allowed;
        table_tiers.finish(allowed);
    } catch (...) {
        table_tiers.abandon();
        throw;
    }

    Datum* elements = nullptr;
    Datum result = 0;
    call_postgres([&] { elements = static_cast<Datum*>(palloc(sizeof(Datum) * tiers.size())); });
    for (std::size_t i = 0; i < tiers.size(); ++i) {
        const Tier& tier = tiers[i];
        elements[i] = decision_datum(fcinfo, allowed && tier.charged ? tier.result : tier.before);
    }
    call_postgres([&] {
        const Oid row_type = call_site(fcinfo)->decision->tdtypeid;
        result = PointerGetDatum(construct_array(elements, static_cast<int>(tiers.size()), row_type,
                                                 -1, false, TYPALIGN_DOUBLE));
    });
    return result;
}

// ratelimit.validate_limit(): the checks consume makes on its settings, and nothing else.
Datum validate_limit_body(FunctionCallInfo fcinfo) {
    const std::int32_t limit = int32_argument(fcinfo, 0, "p_limit");
    const Micros period = interval_argument(fcinfo, 1, "p_period");
    const Algorithm algorithm =
        parse_algorithm("p_algorithm", name_argument(fcinfo, 2, "p_algorithm"));
    const Engine engine = read_engine(fcinfo, 3);
    std::optional<std::int64_t> burst;
    if (!PG_ARGISNULL(4))
        burst = PG_GETARG_INT32(4);
    const Limit checked = make_limit(algorithm, limit, period, burst);
    if (engine == Engine::kMemory)
        require_memory_limit(checked);
    PG_RETURN_VOID();
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
RATELIMIT_SQL_FUNCTION(ratelimit_consume_all, ratelimit::pg::consume_all_body)
RATELIMIT_SQL_FUNCTION(ratelimit_validate_limit, ratelimit::pg::validate_limit_body)
RATELIMIT_SQL_FUNCTION(ratelimit_memory_stats, ratelimit::pg::memory_stats_body)
