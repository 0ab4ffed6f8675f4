// The denial log (pg/policies/denial_log.hpp).
#include "pg/policies/denial_log.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/clock.hpp"
#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/result_row.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "pg/engines/state_engines.hpp"
#include "pg/policies/denial_queue.hpp"
#include "pg/policies/policy_counters.hpp"
#include "pg/policies/policy_http.hpp"

extern "C" {
#include <sys/socket.h>

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "commands/sequence.h"
#include "common/pg_prng.h"
#include "utils/inet.h"
#include "utils/syscache.h"
}

#include "ratelimit/http_fields.hpp"
#include "ratelimit/json_text.hpp"

namespace ratelimit::pg {
namespace {

const Oid kDenialRowTypes[] = {INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID};
SpiStatement denial_insert(
    "INSERT INTO %s.denial_log AS l (slot, logged_at, event_type, severity, source, status, "
    "error_message, event_data) VALUES ($1, $2, 'rate_limit_violation', 'warning', 'ratelimit', "
    "$3, $4, $5) ON CONFLICT (slot) DO UPDATE SET logged_at = EXCLUDED.logged_at, "
    "event_type = EXCLUDED.event_type, severity = EXCLUDED.severity, source = EXCLUDED.source, "
    "status = EXCLUDED.status, error_message = EXCLUDED.error_message, "
    "event_data = EXCLUDED.event_data",
    5, kDenialRowTypes);
const Oid kDenialTrimTypes[] = {INT4OID};
SpiStatement denial_trim("DELETE FROM %s.denial_log WHERE slot OPERATOR(pg_catalog.>=) $1", 1,
                         kDenialTrimTypes);

// round(a period in minutes, 3), as numeric text: "1.000", "0.250".
std::string minutes_text(Micros period) {
    const std::int64_t thousandths = (period * 1000 + kMicrosPerMinute / 2) / kMicrosPerMinute;
    std::string fraction = std::to_string(thousandths % 1000);
    fraction.insert(0, 3 - fraction.size(), '0');
    return std::to_string(thousandths / 1000) + "." + fraction;
}

}  // namespace

void log_denial(FunctionCallInfo fcinfo, const PolicyCall& call, std::size_t request,
                std::int64_t limit, Micros retry_after, bool enforced) {
    const Micros now = call.input.now;
    const ResolvedPolicy& resolved = call.policies[request];
    const int size = denial_log_size();
    double draw = 0;
    if (size > 0)
        call_postgres([&] { draw = pg_prng_double(&pg_global_prng_state); });
    if (size <= 0 || !(draw < denial_log_sample_rate())) {
        count_unlogged_denial(resolved.rule->name);
        return;
    }
    const PolicyRule& rule = *resolved.rule;
    const std::string message =
        "Rate limit exceeded: " + describe_limit(limit, (rule.period + 500) / 1000);
    std::vector<JsonMember> data(8);
    data[0].name = "identifier";
    data[0].kind = JsonMember::Kind::kString;
    data[0].text = std::string(text_bytes(resolved.subject));
    data[1].name = "policy";
    data[1].kind = JsonMember::Kind::kString;
    data[1].text = rule.name;
    data[2].name = "limit";
    data[2].kind = JsonMember::Kind::kNumber;
    data[2].number = limit;
    data[3].name = "window_minutes";
    data[3].kind = JsonMember::Kind::kNumericText;
    data[3].text = minutes_text(rule.period);
    data[4].name = "cost";
    data[4].kind = JsonMember::Kind::kNumber;
    data[4].number = call.input.cost;
    data[5].name = "retry_after_ms";
    data[5].kind = JsonMember::Kind::kNumber;
    data[5].number = milliseconds_up(retry_after);
    data[6].name = "user_id";
    data[7].name = "ip";
    char user_text[64] = {0};
    char ip_text[64] = {0};
    call_postgres([&] {
        if (call.caller.user) {
            pg_uuid_t uuid;
            memcpy(uuid.data, call.caller.user->data(), UUID_LEN);
            strlcpy(user_text, DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&uuid))),
                    sizeof user_text);
        }
        if (call.caller.ip) {
            inet* address = static_cast<inet*>(palloc0(sizeof(inet)));
            const int family = call.caller.ip->family;
            address->inet_data.family = family == 4 ? PGSQL_AF_INET : PGSQL_AF_INET6;
            address->inet_data.bits = family == 4 ? 32 : 128;
            memcpy(address->inet_data.ipaddr, call.caller.ip->bytes.data(), family == 4 ? 4 : 16);
            SET_INET_VARSIZE(address);
            char* host =
                TextDatumGetCString(DirectFunctionCall1(network_host, InetPGetDatum(address)));
            strlcpy(ip_text, host, sizeof ip_text);
        }
    });
    if (user_text[0] != '\0') {
        data[6].kind = JsonMember::Kind::kString;
        data[6].text = user_text;
    }
    if (ip_text[0] != '\0') {
        data[7].kind = JsonMember::Kind::kString;
        // a policy that hashes its keys keeps the caller's IP hashed too
        data[7].text = rule.hash_key ? std::string(text_bytes(hashed_subject(text_datum(ip_text))))
                                     : std::string(ip_text);
    }
    Datum event_data = jsonb_object(data);
    const char* record_text = nullptr;
    call_postgres(
        [&] { record_text = DatumGetCString(DirectFunctionCall1(jsonb_out, event_data)); });
    // An identifier whose escapes make the event too long for the queue's entries (a key of
    // control characters takes six bytes each) is shortened and marked, the same in the row the
    // caller writes and in the queued copy.
    const std::size_t room = denial_queue_event_bytes();
    if (std::strlen(record_text) > room) {
        constexpr std::size_t kMarkerBytes = 40;  // , "identifier_truncated": true
        const std::size_t excess = std::strlen(record_text) - room + kMarkerBytes;
        const std::size_t identifier_bytes = json_string_bytes(data[0].text);
        data[0].text = std::string(json_string_prefix(
            data[0].text, identifier_bytes > excess ? identifier_bytes - excess : 0));
        JsonMember marker;
        marker.name = "identifier_truncated";
        marker.kind = JsonMember::Kind::kBool;
        marker.flag = true;
        data.push_back(std::move(marker));
        event_data = jsonb_object(data);
        call_postgres(
            [&] { record_text = DatumGetCString(DirectFunctionCall1(jsonb_out, event_data)); });
    }
    // The queue (pg/policies/denial_queue.hpp) carries the row to the log whatever becomes of this
    // transaction; one that can write (not read only) also writes it now, so that its own
    // commit shows it at once.
    DenialRecord record;
    record.policy = rule.name;
    record.logged_at = now;
    record.enforced = enforced;
    record.log_size = size;
    record.message = message;
    record.event_data = record_text;
    const bool write_here = !XactReadOnly;
    queue_denial(record, write_here);
    if (!write_here)
        return;
    const Datum status = text_datum(enforced ? "blocked" : "shadow");
    const Datum error_message = text_datum(message);
    call_postgres([&] {
        const Oid schema = extension_schema();
        const Oid sequence = get_relname_relid("denial_log_position", schema);
        const Oid table = get_relname_relid("denial_log", schema);
        if (!OidIsValid(sequence) || !OidIsValid(table))
            elog(ERROR, "ratelimit: the denial log is missing");
        // Written as the table's owner: callers decide by policy without any right on the log.
        HeapTuple class_row = SearchSysCache1(RELOID, ObjectIdGetDatum(table));
        if (!HeapTupleIsValid(class_row))
            elog(ERROR, "ratelimit: the denial log is missing");
        const Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(class_row))->relowner;
        ReleaseSysCache(class_row);
        Oid saved_user = InvalidOid;
        int saved_context = 0;
        GetUserIdAndSecContext(&saved_user, &saved_context);
        SetUserIdAndSecContext(
            owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
        const int slot = static_cast<int>(nextval_internal(sequence, false) % size);
        if (SPI_connect() != SPI_OK_CONNECT)
            elog(ERROR, "ratelimit: SPI_connect failed");
        Datum values[5] = {Int32GetDatum(slot), TimestampTzGetDatum(to_timestamptz(now)), status,
                           error_message, event_data};
        int rc = SPI_execute_plan(denial_insert.plan_for(fcinfo), values, nullptr, false, 0);
        if (rc != SPI_OK_INSERT)
            elog(ERROR, "ratelimit: writing the denial log failed: %s", SPI_result_code_string(rc));
        // A smaller ring than before: the slots past its end go.
        Datum trim[1] = {Int32GetDatum(size)};
        rc = SPI_execute_plan(denial_trim.plan_for(fcinfo), trim, nullptr, false, 0);
        if (rc != SPI_OK_DELETE)
            elog(ERROR, "ratelimit: trimming the denial log failed: %s",
                 SPI_result_code_string(rc));
        SPI_finish();
        SetUserIdAndSecContext(saved_user, saved_context);
    });
}

}  // namespace ratelimit::pg
