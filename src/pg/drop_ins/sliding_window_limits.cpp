// The orphaned-user cleanup's sliding-window limits: check_rate_limit(p_key, p_limit,
// p_window_seconds) over per-second buckets in rate_limit_buckets, and its three tiers (global, IP,
// email) in one call.
//
// Exactness: a key's buckets are read and written under a transaction-scoped advisory lock on
// the key, so concurrent callers of one key take turns and each sees every call committed
// before it (READ COMMITTED takes a new snapshot per statement). Keys are locked in hash order,
// so multi-key calls cannot deadlock each other. Under REPEATABLE READ or SERIALIZABLE the
// snapshot is older than the lock, so those levels are refused rather than risk overage.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/drop_ins/drop_in_rules.hpp"
#include "pg/drop_ins/sliding_window_limits.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/memory_engine.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/subject_hash.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/policy.hpp"
#include "ratelimit/second_buckets.hpp"
#include "ratelimit/validation.hpp"

namespace ratelimit::pg {

namespace {

// First key of the two-part advisory locks this file takes ("RLBK"), so they stay apart from
// an application's own single-bigint advisory locks.
constexpr std::int32_t kBucketLockClass = 0x524C424B;

constexpr char kCountedSql[] =
    "SELECT bucket_time, count FROM %s.rate_limit_buckets"
    " WHERE key = $1 AND bucket_time > $2 ORDER BY bucket_time";
constexpr Oid kCountedTypes[] = {TEXTOID, TIMESTAMPTZOID};
SpiStatement counted_statement(kCountedSql, 2, kCountedTypes);

// window_seconds keeps the longest window a bucket was counted under: cleanup keeps every
// bucket younger than the longest window in use.
constexpr char kRecordSql[] =
    "INSERT INTO %s.rate_limit_buckets AS b (key, bucket_time, count, window_seconds)"
    " VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (key, bucket_time) DO UPDATE SET count = b.count + EXCLUDED.count,"
    "  window_seconds = GREATEST(b.window_seconds, EXCLUDED.window_seconds)";
constexpr Oid kRecordTypes[] = {TEXTOID, TIMESTAMPTZOID, INT4OID, INT4OID};
SpiStatement record_statement(kRecordSql, 4, kRecordTypes);

struct KeysDecision {
    std::vector<BucketDecision> per_key;
    int denied = -1;                 // first key, in the caller's order, that denied
    std::int64_t retry_after_s = 0;  // when every denying key would allow
};

// Counted buckets of one key, copied out of SPI into PostgreSQL memory.
struct CountedRows {
    std::uint64_t n;
    Micros* starts;
    std::int64_t* counts;
};

std::uint32_t lock_hash(Datum key) {
    text* t = DatumGetTextPP(key);
    return hash_bytes(reinterpret_cast<const unsigned char*>(VARDATA_ANY(t)),
                      static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

// The per-second buckets as one of the core's TierEngines (ratelimit/policy.hpp): every key of
// the group is locked (in hash order), read and decided, and the call is recorded in each only
// if every one allows. The buckets' own decisions (counts, whole-second waits) are kept in
// `decisions`, by tier index.
class BucketTierEngine final : public TierEngine {
  public:
    BucketTierEngine(FunctionCallInfo fcinfo, const std::vector<BucketKeyLimit>& keys,
                     std::vector<BucketDecision>* decisions)
        : fcinfo_(fcinfo), keys_(keys), decisions_(decisions) {}

    bool transactional() const override { return false; }
    void undo() override {}
    void keep() override {}
    void abandon() noexcept override {}

    void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                bool charge) override {
        std::vector<std::size_t> lock_order(count);
        std::vector<std::uint32_t> hashes(count);
        for (std::size_t i = 0; i < count; ++i)
            hashes[i] = lock_hash(keys_[tiers[i]->index].key);
        std::iota(lock_order.begin(), lock_order.end(), 0);
        std::sort(lock_order.begin(), lock_order.end(),
                  [&](std::size_t a, std::size_t b) { return hashes[a] < hashes[b]; });

        CountedRows* rows = nullptr;
        call_postgres([&] {
            if (IsolationUsesXactSnapshot()) {
                ereport(ERROR,
                        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                         errmsg("sliding-window rate limits need READ COMMITTED isolation"),
                         errdetail("Under REPEATABLE READ or SERIALIZABLE a concurrent call's "
                                   "buckets may be invisible, which would allow more than the "
                                   "limit."),
                         errhint("Call it in a READ COMMITTED transaction (PostgREST's "
                                 "default).")));
            }
            if (SPI_connect() != SPI_OK_CONNECT) {
                elog(ERROR, "ratelimit: SPI_connect failed");
            }
            for (std::size_t i : lock_order) {
                DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(kBucketLockClass),
                                    Int32GetDatum(static_cast<std::int32_t>(hashes[i])));
            }
            rows = static_cast<CountedRows*>(palloc0(sizeof(CountedRows) * count));
            for (std::size_t i = 0; i < count; ++i) {
                const BucketKeyLimit& key = keys_[tiers[i]->index];
                Datum values[] = {key.key,
                                  TimestampTzGetDatum(to_timestamptz(key.rule.counts_after(now)))};
                int rc = SPI_execute_plan(counted_statement.plan_for(fcinfo_), values, nullptr,
                                          false, 0);
                if (rc != SPI_OK_SELECT) {
                    elog(ERROR, "ratelimit: reading buckets failed: %s",
                         SPI_result_code_string(rc));
                }
                CountedRows& out = rows[i];
                out.n = SPI_processed;
                out.starts = static_cast<Micros*>(palloc(sizeof(Micros) * (out.n + 1)));
                out.counts = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * (out.n + 1)));
                for (std::uint64_t r = 0; r < out.n; ++r) {
                    bool isnull = false;
                    HeapTuple tuple = SPI_tuptable->vals[r];
                    out.starts[r] = from_timestamptz(DatumGetTimestampTz(
                        SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull)));
                    out.counts[r] =
                        DatumGetInt32(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull));
                }
                SPI_freetuptable(SPI_tuptable);
            }
        });

        bool every_allows = true;
        for (std::size_t i = 0; i < count; ++i) {
            TierCall& tier = *tiers[i];
            std::vector<Bucket> counted(rows[i].n);
            for (std::uint64_t r = 0; r < rows[i].n; ++r)
                counted[r] = Bucket{rows[i].starts[r], rows[i].counts[r]};
            const BucketDecision d = keys_[tier.index].rule.decide(counted, cost, now);
            (*decisions_)[tier.index] = d;
            tier.before.allowed = d.allowed;
            tier.before.limit = tier.limit.limit;
            tier.before.remaining = std::max<std::int64_t>(0, tier.limit.limit - d.current);
            tier.before.retry_after = d.retry_after_s * kMicrosPerSecond;
            tier.result = tier.before;
            if (tier.enforced && !d.allowed)
                every_allows = false;
        }

        const bool record = charge && every_allows;
        call_postgres([&] {
            if (record) {
                Datum bucket = TimestampTzGetDatum(to_timestamptz(SecondBuckets::bucket_of(now)));
                for (std::size_t i = 0; i < count; ++i) {
                    const BucketKeyLimit& key = keys_[tiers[i]->index];
                    Datum values[] = {key.key, bucket,
                                      Int32GetDatum(static_cast<std::int32_t>(cost)),
                                      Int32GetDatum(key.window_seconds)};
                    int rc = SPI_execute_plan(record_statement.plan_for(fcinfo_), values, nullptr,
                                              false, 0);
                    if (rc != SPI_OK_INSERT) {
                        elog(ERROR, "ratelimit: recording a bucket failed: %s",
                             SPI_result_code_string(rc));
                    }
                }
            }
            SPI_finish();
        });
        for (std::size_t i = 0; i < count; ++i)
            tiers[i]->charged = record;
    }

  private:
    FunctionCallInfo fcinfo_;
    const std::vector<BucketKeyLimit>& keys_;
    std::vector<BucketDecision>* decisions_;
};

// The buckets on an engine (ratelimit.dropin_engine): each key a sliding_window log in the
// namespace of rate_limit_buckets, decided at the start of the current second. An entry made at
// a bucket's start then counts exactly while the bucket does (b > now - W, for whole seconds b
// and W), and the waits come out in whole seconds. The keys are decided all or nothing by the
// engines' own decide_tiers. Fills `per_key` as BucketTierEngine does and returns whether the
// call was allowed.
bool decide_keys_on_engine(Engine engine, const std::vector<BucketKeyLimit>& keys,
                           std::int64_t cost, const char* function_name,
                           std::vector<BucketDecision>* per_key) {
    const Micros now = SecondBuckets::bucket_of(clock_now());
    const Datum space = drop_in_space(DropInSpace::kRateLimitBuckets);
    std::vector<StateKey> state_keys(keys.size());
    std::vector<TierCall> tiers(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
        state_keys[i] = StateKey{space, keys[i].key};
        tiers[i].index = i;
        tiers[i].engine = engine;
        tiers[i].limit.algorithm = Algorithm::kSlidingWindow;
        tiers[i].limit.limit = keys[i].rule.limit();
        tiers[i].limit.burst = keys[i].rule.limit();
        tiers[i].limit.period = keys[i].rule.window();
        if (engine == Engine::kMemory) {
            try {
                require_memory_limit(tiers[i].limit);
            } catch (const ArgumentError& error) {
                // Named as this function names the limit.
                const std::string detail =
                    std::string(error.what()).substr(error.argument().size() + 1);
                throw ArgumentError::invalid(keys[i].limit_name, detail);
            }
        }
    }
    const Oid schema = engine == Engine::kMemory ? InvalidOid : drop_in_state_schema();
    sort_tiers(tiers, state_keys);
    const bool allowed = decide_tiers(tiers, state_keys, schema, function_name, now, cost);

    EngineStorage storage;
    for (const TierCall& tier : tiers) {
        const std::int64_t limit = tier.limit.limit;
        // The count before this call: the charged decision's remaining is after it; an
        // uncharged one is the key as it stands (a peek, or a denied consume, which changes
        // nothing).
        std::int64_t counted =
            tier.charged ? limit - tier.result.remaining - cost : limit - tier.before.remaining;
        if (!tier.charged && tier.before.remaining == 0) {
            // At or over the limit (a key counted under a higher limit earlier): the count
            // itself, from a look under the ceiling.
            Limit ceiling = tier.limit;
            ceiling.limit = ceiling.burst = PG_INT32_MAX;
            const Decision peek =
                state_engine(engine, schema, function_name, storage)
                    .decide(state_keys[tier.index], ceiling, now, cost, Action::kPeek);
            counted = PG_INT32_MAX - peek.remaining;
        }
        BucketDecision& d = (*per_key)[tier.index];
        d.allowed = tier.before.allowed;
        d.current = d.allowed ? counted + cost : counted;
        d.retry_after_s =
            d.allowed ? 0 : (tier.before.retry_after + kMicrosPerSecond - 1) / kMicrosPerSecond;
    }
    return allowed;
}

// Decides a call of `cost` on every key, all or nothing (the core's decide_all_or_nothing): the
// call is recorded in every key's bucket only if every key allows it.
KeysDecision decide_keys(FunctionCallInfo fcinfo, const std::vector<BucketKeyLimit>& keys,
                         std::int64_t cost, const char* function_name) {
    KeysDecision decision;
    decision.per_key.resize(keys.size());
    bool allowed = false;
    if (const std::optional<Engine> engine = drop_in_engine()) {
        allowed = decide_keys_on_engine(*engine, keys, cost, function_name, &decision.per_key);
    } else {
        const Micros now = clock_now();
        std::vector<TierCall> tiers(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) {
            tiers[i].index = i;
            // The buckets live in a table; the core only needs to know which TierEngine serves
            // them.
            tiers[i].engine = Engine::kTable;
            tiers[i].limit.limit = keys[i].rule.limit();
        }
        BucketTierEngine buckets(fcinfo, keys, &decision.per_key);
        TierEngine* const engines[3] = {&buckets, nullptr, nullptr};
        allowed = decide_all_or_nothing(tiers, engines, now, cost);
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
        BucketDecision& d = decision.per_key[i];
        if (!d.allowed) {
            if (decision.denied < 0)
                decision.denied = static_cast<int>(i);
            decision.retry_after_s = std::max(decision.retry_after_s, d.retry_after_s);
        } else if (!allowed) {
            // Nothing was charged: a key that would have allowed reports its count without
            // this call.
            d.current -= cost;
        }
    }
    return decision;
}

BucketKeyLimit key_limit(Datum key, std::int32_t limit, std::int32_t window_seconds,
                         const char* limit_name, const char* window_name) {
    require_positive(limit_name, limit);
    Micros window = window_length(window_name, window_seconds, kMicrosPerSecond);
    return BucketKeyLimit{key, window_seconds, SecondBuckets(limit, window), limit_name};
}

// A count past 2^31 - 1 (buckets summed under a longer window than they were counted in) stops
// there, as the other apps' counts do, instead of wrapping to a negative count.
Datum int_datum(std::int64_t value) {
    return Int32GetDatum(static_cast<std::int32_t>(std::min<std::int64_t>(value, PG_INT32_MAX)));
}

}  // namespace

BucketKeyCall read_bucket_key_call(FunctionCallInfo fcinfo) {
    Datum key = key_argument(fcinfo, 0, "p_key");
    std::int32_t limit = int32_argument(fcinfo, 1, "p_limit");
    std::int32_t window_seconds = int32_argument(fcinfo, 2, "p_window_seconds");
    BucketKeyCall call;
    call.cost = int32_argument(fcinfo, 3, "p_cost");
    call.keys.push_back(key_limit(key, limit, window_seconds, "p_limit", "p_window_seconds"));
    require_non_negative_cost("p_cost", call.cost);
    if (call.cost > limit) {
        throw ArgumentError::invalid("p_cost", "must not exceed p_limit (" + std::to_string(limit) +
                                                   "), got " + std::to_string(call.cost));
    }
    return call;
}

namespace {

// check_rate_limit(p_key, p_limit, p_window_seconds, p_cost DEFAULT 1)
//   RETURNS TABLE(allowed boolean, current_count integer, retry_after integer)
Datum check_rate_limit_buckets(FunctionCallInfo fcinfo) {
    BucketKeyCall call = read_bucket_key_call(fcinfo);
    std::vector<BucketKeyLimit>& keys = call.keys;
    const std::int32_t cost = call.cost;
    KeysDecision decision = decide_keys(fcinfo, keys, cost, "check_rate_limit");
    const BucketDecision& d = decision.per_key[0];
    Datum values[] = {BoolGetDatum(d.allowed), int_datum(d.current), int_datum(d.retry_after_s)};
    bool nulls[] = {false, false, false};
    Datum result = 0;
    call_postgres([&] { result = return_single_row(fcinfo, values, nulls); });
    return result;
}

// "<prefix>:" followed by the SHA-256 of the text, in hex, computed in the database so that
// raw IPs and emails are never stored.
Datum hashed_key(const char* prefix, Datum value) {
    Datum key = 0;
    call_postgres([&] {
        const text* t = DatumGetTextPP(value);
        key = sha256_hex(prefix, VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
    });
    return key;
}

// check_rate_limit_tiers(p_ip, p_email, <limits and windows of each tier>)
//   RETURNS TABLE(allowed, denied_tier, retry_after, global_count, ip_count, email_count)
// The cleanup's global -> IP -> email evaluation as one all-or-nothing decision.
Datum check_rate_limit_tiers(FunctionCallInfo fcinfo) {
    Datum ip = key_argument(fcinfo, 0, "p_ip");
    Datum email = key_argument(fcinfo, 1, "p_email");
    std::int32_t limits[3];
    std::int32_t windows[3];
    const char* limit_names[] = {"p_global_limit", "p_ip_limit", "p_email_limit"};
    const char* window_names[] = {"p_global_window_seconds", "p_ip_window_seconds",
                                  "p_email_window_seconds"};
    for (int t = 0; t < 3; ++t) {
        limits[t] = int32_argument(fcinfo, 2 + 2 * t, limit_names[t]);
        windows[t] = int32_argument(fcinfo, 3 + 2 * t, window_names[t]);
    }
    Datum global_key = 0;
    Datum normalized_ip = 0;
    Datum normalized_email = 0;
    call_postgres([&] {
        global_key = PointerGetDatum(cstring_to_text("global"));
        normalized_ip = DirectFunctionCall1(btrim1, ip);
        normalized_email = DirectFunctionCall1Coll(lower, DEFAULT_COLLATION_OID,
                                                   DirectFunctionCall1(btrim1, email));
    });
    // Only spaces would trim to the one empty subject every such caller shares.
    require_key("p_ip", VARSIZE_ANY_EXHDR(DatumGetPointer(normalized_ip)));
    require_key("p_email", VARSIZE_ANY_EXHDR(DatumGetPointer(normalized_email)));
    std::vector<BucketKeyLimit> keys{
        key_limit(global_key, limits[0], windows[0], limit_names[0], window_names[0]),
        key_limit(hashed_key("ip", normalized_ip), limits[1], windows[1], limit_names[1],
                  window_names[1]),
        key_limit(hashed_key("email", normalized_email), limits[2], windows[2], limit_names[2],
                  window_names[2])};
    KeysDecision decision = decide_keys(fcinfo, keys, 1, "check_rate_limit_tiers");

    static const char* const kTierNames[] = {"global", "ip", "email"};
    Datum values[6] = {
        BoolGetDatum(decision.denied < 0),      0,
        int_datum(decision.retry_after_s),      int_datum(decision.per_key[0].current),
        int_datum(decision.per_key[1].current), int_datum(decision.per_key[2].current)};
    bool nulls[6] = {false, decision.denied < 0, false, false, false, false};
    Datum result = 0;
    call_postgres([&] {
        if (decision.denied >= 0) {
            values[1] = PointerGetDatum(cstring_to_text(kTierNames[decision.denied]));
        }
        result = return_single_row(fcinfo, values, nulls);
    });
    return result;
}

}  // namespace

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_sliding_window_limits_check_rate_limit,
                       ratelimit::pg::check_rate_limit_buckets)
RATELIMIT_SQL_FUNCTION(ratelimit_sliding_window_limits_check_rate_limit_tiers,
                       ratelimit::pg::check_rate_limit_tiers)
