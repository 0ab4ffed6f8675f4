#include "pg/policies/policy_cache.hpp"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/key_state_table.hpp"
#include "pg/policies/policy_arguments.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/validation.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include <sys/socket.h>
#include "utils/inet.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"
}

namespace ratelimit::pg {
namespace {

enum Table { kPolicies, kTiers, kKeyOverrides, kAccessList, kPartitionSecret, kTableCount };

constexpr const char* kTableNames[kTableCount] = {"policies", "tiers", "key_overrides",
                                                  "access_list", "partition_key_secret"};

// What the cache holds and which tables it was read from. The relcache callback only touches
// the plain fields (it may run at any point where invalidations are taken in).
PolicyCatalog* catalog = nullptr;
bool catalog_valid = false;
Oid catalog_schema = InvalidOid;
Oid watched[kTableCount] = {InvalidOid, InvalidOid, InvalidOid, InvalidOid, InvalidOid};
bool callback_registered = false;

void on_relcache_invalidation(Datum, Oid relid) {
    if (relid == InvalidOid) {
        catalog_valid = false;
        return;
    }
    for (Oid table : watched) {
        if (table == relid)
            catalog_valid = false;
    }
}

// One table's rows, column by column, copied out of the heap into the caller's memory:
// values[row * columns + column]. Numeric columns come as C strings (numeric_out).
struct RawRows {
    int rows = 0;
    int columns = 0;
    Datum* values = nullptr;
    bool* nulls = nullptr;
};

struct Column {
    const char* name;
    Oid type;
    // A column a later version added: a table of the version before (the library is new, the
    // update has not run yet) reads as NULL there.
    bool added_later = false;
};

// An interval[] as a palloc'd int64 array: the element count, then each element's length in
// microseconds (a month counts as 30 days: the table's check refuses months). PostgreSQL code:
// call inside call_postgres().
Datum interval_lengths(Datum value) {
    ArrayType* array = DatumGetArrayTypeP(value);
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    deconstruct_array(array, INTERVALOID, sizeof(Interval), false, TYPALIGN_DOUBLE, &elements,
                      &nulls, &count);
    auto* lengths = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * (count + 1)));
    lengths[0] = count;
    for (int i = 0; i < count; ++i) {
        const Interval* span = nulls[i] ? nullptr : DatumGetIntervalP(elements[i]);
        lengths[i + 1] =
            span == nullptr ? 0 : (span->month * 30LL + span->day) * kMicrosPerDay + span->time;
    }
    return PointerGetDatum(lengths);
}

// Reads every row of `name` in `schema` visible to `snapshot`. PostgreSQL code: call inside
// call_postgres().
void read_rows(Oid schema, Table which, const Column* columns, int column_count, Snapshot snapshot,
               RawRows* out) {
    const char* name = kTableNames[which];
    const Oid relid = require_relation(name, schema);
    watched[which] = relid;
    Relation rel = table_open(relid, AccessShareLock);
    TupleDesc desc = RelationGetDescr(rel);
    AttrNumber attnums[24];
    for (int c = 0; c < column_count; ++c) {
        attnums[c] = InvalidAttrNumber;
        for (int a = 0; a < desc->natts; ++a) {
            Form_pg_attribute attribute = TupleDescAttr(desc, a);
            if (!attribute->attisdropped &&
                std::strcmp(NameStr(attribute->attname), columns[c].name) == 0 &&
                attribute->atttypid == columns[c].type)
                attnums[c] = attribute->attnum;
        }
        if (attnums[c] == InvalidAttrNumber && !columns[c].added_later) {
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("ratelimit: table \"%s\" has been altered", name),
                     errdetail("Column \"%s\" is missing or has another type.", columns[c].name),
                     errhint("Reinstall the extension to restore it.")));
        }
    }
    int capacity = 16;
    out->columns = column_count;
    out->rows = 0;
    out->values = static_cast<Datum*>(palloc(sizeof(Datum) * capacity * column_count));
    out->nulls = static_cast<bool*>(palloc(sizeof(bool) * capacity * column_count));
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        if (out->rows == capacity) {
            capacity *= 2;
            out->values =
                static_cast<Datum*>(repalloc(out->values, sizeof(Datum) * capacity * column_count));
            out->nulls =
                static_cast<bool*>(repalloc(out->nulls, sizeof(bool) * capacity * column_count));
        }
        for (int c = 0; c < column_count; ++c) {
            bool is_null = true;
            Datum value = attnums[c] == InvalidAttrNumber
                              ? static_cast<Datum>(0)
                              : heap_getattr(tuple, attnums[c], desc, &is_null);
            const int at = out->rows * column_count + c;
            out->nulls[at] = is_null;
            if (is_null) {
                out->values[at] = 0;
                continue;
            }
            switch (columns[c].type) {
                case NUMERICOID:
                    out->values[at] = DirectFunctionCall1(numeric_out, value);
                    break;
                case TEXTOID:
                case CIDROID:
                case BYTEAOID:
                    out->values[at] = PointerGetDatum(PG_DETOAST_DATUM_COPY(value));
                    break;
                case INTERVALOID:
                    out->values[at] = datumCopy(value, false, sizeof(Interval));
                    break;
                case INTERVALARRAYOID:
                    out->values[at] = interval_lengths(value);
                    break;
                case UUIDOID:
                    out->values[at] = datumCopy(value, false, UUID_LEN);
                    break;
                default:  // by value: int4, bool, timestamptz
                    out->values[at] = value;
                    break;
            }
        }
        ++out->rows;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
}

std::string text_string(Datum value) {
    const text* t = reinterpret_cast<const text*>(DatumGetPointer(value));
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// An expiry column: NULL and +infinity never end; -infinity has always ended.
std::optional<Micros> expiry(bool is_null, Datum value) {
    if (is_null)
        return std::nullopt;
    const TimestampTz at = DatumGetTimestampTz(value);
    if (TIMESTAMP_IS_NOEND(at))
        return std::nullopt;
    if (TIMESTAMP_IS_NOBEGIN(at))
        return std::numeric_limits<Micros>::min();
    return from_timestamptz(at);
}

// A row's error names the row: the tables are checked on write, so this is a row written past
// its checks (a disabled trigger).
std::string row_argument(const char* table, const std::string& name) {
    return std::string("ratelimit.") + table + " row \"" + name.substr(0, 64) + "\":";
}

void load_policies(const RawRows& rows, PolicyCatalog* out) {
    for (int r = 0; r < rows.rows; ++r) {
        const Datum* v = rows.values + r * rows.columns;
        const bool* n = rows.nulls + r * rows.columns;
        PolicyRule rule;
        rule.name = text_string(v[0]);
        const std::string argument = row_argument("policies", rule.name);
        rule.algorithm = parse_algorithm(argument.c_str(), text_string(v[1]));
        rule.limit = DatumGetInt32(v[2]);
        const Interval* period = DatumGetIntervalP(v[3]);
        CalendarPolicy calendar;
        if (period->month == 0 && n[11]) {
            rule.period = interval_length(argument, period->month, period->day, period->time);
        } else {
            calendar.unit =
                calendar_unit(argument, period->month, period->day, period->time, !n[11]);
            ZoneCache cache{};
            calendar.zone =
                n[11] ? utc_zone() : find_time_zone(argument.c_str(), text_string(v[11]), &cache);
            rule.period = nominal_calendar_window(calendar.unit);
            if (rule.algorithm != Algorithm::kFixedWindow)
                throw ArgumentError::invalid(argument, "a calendar period needs fixed_window");
        }
        if (!n[4])
            rule.burst = DatumGetInt32(v[4]);
        rule.engine = parse_engine(argument.c_str(), text_string(v[5]));
        rule.count_denied = DatumGetBool(v[6]);
        rule.shadow = DatumGetBool(v[7]);
        rule.hash_key = DatumGetBool(v[8]);
        rule.log_denials = DatumGetBool(v[9]);
        if (!n[10]) {
            out->quota_units.emplace(rule.name, text_string(v[10]));
            rule.concurrency = text_string(v[10]) == kConcurrentRequests;
        }
        if (calendar.unit != CalendarUnit::kNone)
            out->calendars.emplace(rule.name, calendar);
        if (!n[12]) {
            // Checked on write: 0 to 1 hour, no months.
            const Interval* jitter = DatumGetIntervalP(v[12]);
            const Micros length = jitter->day * kMicrosPerDay + jitter->time;
            if (length > 0)
                out->reset_jitters.emplace(rule.name, length);
        }
        if (!n[13]) {
            // Checked on write; checked again here, as a row written past its trigger would be
            // a ladder the counter cannot keep.
            const auto* lengths = reinterpret_cast<const std::int64_t*>(DatumGetPointer(v[13]));
            rule.penalty_blocks.assign(lengths + 1, lengths + 1 + lengths[0]);
            const Interval* decay = n[14] ? nullptr : DatumGetIntervalP(v[14]);
            rule.penalty_decay = decay == nullptr ? 0 : decay->day * kMicrosPerDay + decay->time;
            require_valid_penalties(argument, rule.penalty_blocks, rule.penalty_decay);
        }
        if (!n[15]) {
            const Interval* delay = DatumGetIntervalP(v[15]);
            rule.max_delay = interval_length(argument, delay->month, delay->day, delay->time);
        }
        if (!n[16] || !n[17]) {
            PolicyLookups lookups;
            if (!n[16])
                lookups.tier = text_string(v[16]);
            if (!n[17])
                lookups.limit = text_string(v[17]);
            out->lookups.emplace(rule.name, lookups);
        }
        std::string name = rule.name;
        out->policies.emplace(std::move(name), std::move(rule));
    }
}

void load_tiers(const RawRows& rows, PolicyCatalog* out) {
    for (int r = 0; r < rows.rows; ++r) {
        const Datum* v = rows.values + r * rows.columns;
        TierRule tier;
        tier.name = text_string(v[0]);
        tier.multiplier =
            Multiplier::parse(row_argument("tiers", tier.name), DatumGetCString(v[1]));
        tier.bypass = DatumGetBool(v[2]);
        std::string name = tier.name;
        out->tiers.emplace(std::move(name), std::move(tier));
    }
}

std::string override_key(std::string_view policy, std::string_view key) {
    std::string joined;
    joined.reserve(policy.size() + 1 + key.size());
    joined.append(policy);
    joined.push_back('\0');
    joined.append(key);
    return joined;
}

void load_overrides(const RawRows& rows, PolicyCatalog* out) {
    for (int r = 0; r < rows.rows; ++r) {
        const Datum* v = rows.values + r * rows.columns;
        const bool* n = rows.nulls + r * rows.columns;
        KeyOverrideRule rule;
        const std::string policy = text_string(v[0]);
        if (!n[2])
            rule.limit = DatumGetInt32(v[2]);
        if (!n[3])
            rule.multiplier =
                Multiplier::parse(row_argument("key_overrides", policy), DatumGetCString(v[3]));
        rule.bypass = DatumGetBool(v[4]);
        rule.expires_at = expiry(n[5], v[5]);
        out->overrides.emplace(override_key(policy, text_string(v[1])), rule);
    }
}

IpNetwork network_of(Datum value) {
    const inet* address = reinterpret_cast<const inet*>(DatumGetPointer(value));
    IpNetwork network;
    network.address.family = ip_family(address) == PGSQL_AF_INET ? 4 : 6;
    std::memcpy(network.address.bytes.data(), ip_addr(address),
                network.address.family == 4 ? 4 : 16);
    network.prefix_bits = ip_bits(address);
    return network;
}

void load_access_list(const RawRows& rows, PolicyCatalog* out) {
    for (int r = 0; r < rows.rows; ++r) {
        const Datum* v = rows.values + r * rows.columns;
        const bool* n = rows.nulls + r * rows.columns;
        AccessEntry entry;
        entry.deny = text_string(v[0]) == "deny";
        if (!n[1])
            entry.policy = text_string(v[1]);
        if (!n[2]) {
            Uuid user;
            std::memcpy(user.data(), DatumGetUUIDP(v[2])->data, UUID_LEN);
            entry.user = user;
        }
        if (!n[3])
            entry.key = text_string(v[3]);
        if (!n[4])
            entry.ip = network_of(v[4]);
        entry.expires_at = expiry(n[5], v[5]);
        out->access_list.push_back(std::move(entry));
    }
}

constexpr Column kPolicyColumns[] = {{"name", TEXTOID},
                                     {"algorithm", TEXTOID},
                                     {"limit", INT4OID},
                                     {"period", INTERVALOID},
                                     {"burst", INT4OID},
                                     {"engine", TEXTOID},
                                     {"count_denied", BOOLOID},
                                     {"shadow", BOOLOID},
                                     {"hash_key", BOOLOID},
                                     {"log_denials", BOOLOID},
                                     {"quota_unit", TEXTOID},
                                     {"time_zone", TEXTOID},
                                     {"reset_jitter", INTERVALOID},
                                     {"penalty_blocks", INTERVALARRAYOID},
                                     {"penalty_decay", INTERVALOID},
                                     {"max_delay", INTERVALOID},
                                     {"tier_lookup", TEXTOID, true},
                                     {"limit_lookup", TEXTOID, true}};
constexpr Column kTierColumns[] = {
    {"name", TEXTOID}, {"multiplier", NUMERICOID}, {"bypass", BOOLOID}};
constexpr Column kOverrideColumns[] = {{"policy", TEXTOID}, {"key", TEXTOID},
                                       {"limit", INT4OID},  {"multiplier", NUMERICOID},
                                       {"bypass", BOOLOID}, {"expires_at", TIMESTAMPTZOID}};
constexpr Column kAccessColumns[] = {{"action", TEXTOID},  {"policy", TEXTOID},
                                     {"user_id", UUIDOID}, {"key", TEXTOID},
                                     {"ip", CIDROID},      {"expires_at", TIMESTAMPTZOID}};
constexpr Column kSecretColumns[] = {{"secret", BYTEAOID}};

template <std::size_t N>
constexpr int count_of(const Column (&)[N]) {
    return static_cast<int>(N);
}

void load(Oid schema) {
    if (!callback_registered) {
        call_postgres([] { CacheRegisterRelcacheCallback(on_relcache_invalidation, 0); });
        callback_registered = true;
    }
    // Marked valid before reading: an invalidation taken in while the tables are opened marks
    // it invalid again, and the next call reads once more.
    catalog_valid = true;
    catalog_schema = schema;
    RawRows rows[kTableCount];
    try {
        call_postgres([&] {
            Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
            read_rows(schema, kPolicies, kPolicyColumns, count_of(kPolicyColumns), snapshot,
                      &rows[kPolicies]);
            read_rows(schema, kTiers, kTierColumns, count_of(kTierColumns), snapshot,
                      &rows[kTiers]);
            read_rows(schema, kKeyOverrides, kOverrideColumns, count_of(kOverrideColumns), snapshot,
                      &rows[kKeyOverrides]);
            read_rows(schema, kAccessList, kAccessColumns, count_of(kAccessColumns), snapshot,
                      &rows[kAccessList]);
            read_rows(schema, kPartitionSecret, kSecretColumns, count_of(kSecretColumns), snapshot,
                      &rows[kPartitionSecret]);
            UnregisterSnapshot(snapshot);
        });
        auto fresh = std::make_unique<PolicyCatalog>();
        load_policies(rows[kPolicies], fresh.get());
        load_tiers(rows[kTiers], fresh.get());
        load_overrides(rows[kKeyOverrides], fresh.get());
        load_access_list(rows[kAccessList], fresh.get());
        // One row at most (the table's key says so); the first read is the one used.
        if (rows[kPartitionSecret].rows > 0 && !rows[kPartitionSecret].nulls[0])
            fresh->partition_secret = text_string(rows[kPartitionSecret].values[0]);
        delete catalog;
        catalog = fresh.release();
    } catch (...) {
        catalog_valid = false;
        throw;
    }
}

}  // namespace

namespace {

// Look-ups build their key in one buffer, reused call after call (no allocation once warm).
std::string& lookup_buffer(std::string_view first, std::string_view second = {},
                           bool joined = false) {
    static std::string buffer;
    buffer.assign(first);
    if (joined) {
        buffer.push_back('\0');
        buffer.append(second);
    }
    return buffer;
}

}  // namespace

const PolicyLookups* PolicyCatalog::policy_lookups(std::string_view policy) const {
    if (lookups.empty())
        return nullptr;
    const auto found = lookups.find(lookup_buffer(policy));
    return found == lookups.end() ? nullptr : &found->second;
}

const PolicyRule* PolicyCatalog::policy(std::string_view name) const {
    const auto found = policies.find(lookup_buffer(name));
    return found == policies.end() ? nullptr : &found->second;
}

const TierRule* PolicyCatalog::tier(std::string_view name) const {
    const auto found = tiers.find(lookup_buffer(name));
    return found == tiers.end() ? nullptr : &found->second;
}

const KeyOverrideRule* PolicyCatalog::key_override(std::string_view policy,
                                                   std::string_view key) const {
    if (overrides.empty())
        return nullptr;
    const auto found = overrides.find(lookup_buffer(policy, key, true));
    return found == overrides.end() ? nullptr : &found->second;
}

const std::string* PolicyCatalog::quota_unit(std::string_view policy) const {
    if (quota_units.empty())
        return nullptr;
    const auto found = quota_units.find(lookup_buffer(policy));
    return found == quota_units.end() ? nullptr : &found->second;
}

const CalendarPolicy* PolicyCatalog::calendar(std::string_view policy) const {
    if (calendars.empty())
        return nullptr;
    const auto found = calendars.find(lookup_buffer(policy));
    return found == calendars.end() ? nullptr : &found->second;
}

Micros PolicyCatalog::reset_jitter(std::string_view policy) const {
    if (reset_jitters.empty())
        return 0;
    const auto found = reset_jitters.find(lookup_buffer(policy));
    return found == reset_jitters.end() ? 0 : found->second;
}

const PolicyCatalog& policy_catalog(Oid schema) {
    call_postgres([] { AcceptInvalidationMessages(); });
    if (!catalog_valid || catalog == nullptr || catalog_schema != schema)
        load(schema);
    return *catalog;
}

const PolicyCatalog* current_policy_catalog() {
    return catalog_valid ? catalog : nullptr;
}

namespace {

// ratelimit.policy_tables_changed(): the statement trigger on the tables of the cache that
// invalidates every backend's cache of them when the statement's transaction commits.
Datum policy_tables_changed_body(FunctionCallInfo fcinfo) {
    call_postgres([&] {
        if (!CALLED_AS_TRIGGER(fcinfo)) {
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("trigger functions can only be called as triggers")));
        }
        auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
        CacheInvalidateRelcache(trigger->tg_relation);
    });
    return PointerGetDatum(nullptr);
}

}  // namespace
}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_policy_tables_changed, ratelimit::pg::policy_tables_changed_body)
