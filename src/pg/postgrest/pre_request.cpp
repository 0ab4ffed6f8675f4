// ratelimit.pre_request(): PostgREST's db-pre-request hook. PostgREST calls it in each request's
// transaction after publishing the request as settings (request.method, request.path,
// request.headers, request.jwt.claims) and switching to the request's role. It matches the
// request against ratelimit.request_routes (the rules are the core's, request_routes.hpp),
// decides the policies of the matching routes all-or-nothing through ratelimit.check_http (so
// the decision, the counters, the headers and the bodies are those of every other policy call),
// then:
//  - allowed: appends the rate-limit headers to response.headers (a JSON array of one-member
//    objects, as PostgREST reads it), for the response whatever it turns out to be;
//  - denied: raises PostgREST's custom error, SQLSTATE PGRST, whose message is the JSON body
//    (code, message, details, hint) and whose detail is {"status": 429, "headers": {...}}.
// GET and HEAD run in read-only transactions, on a primary or a replica alike: the routes
// table only lets them reach memory-engine policies (checked when a route is written), and the
// denial log is not written in a read-only transaction (the denial is counted as not logged).
#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "pg/postgrest/pre_request.hpp"

#include "pg/bridge/extension_schema.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/postgrest/jwt_caller.hpp"
#include "pg/policies/policy_cache.hpp"
#include "pg/bridge/postgres.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/bridge/spi_statement.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/http_fields.hpp"
#include "ratelimit/identity.hpp"
#include "ratelimit/request_routes.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inet.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
}

namespace ratelimit::pg {
namespace {

// The routes in id order. Read per request: the table is small, and an edit applies to the
// next request.
const Oid kNoTypes[1] = {InvalidOid};
// tier_claim is read through to_jsonb so that a table of a version before 0.7.0 (without it)
// is read too, until ALTER EXTENSION ratelimit UPDATE.
SpiStatement routes_query(
    "SELECT r.methods::pg_catalog.text[], r.path_pattern, r.roles::pg_catalog.text[], r.policy, "
    "r.key, pg_catalog.to_jsonb(r.*) OPERATOR(pg_catalog.->>) 'tier_claim' "
    "FROM %s.request_routes r ORDER BY r.id",
    0, kNoTypes);

std::vector<std::string> text_array_strings(Datum value) {
    std::vector<std::string> out;
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    deconstruct_array(DatumGetArrayTypeP(value), TEXTOID, -1, false, TYPALIGN_INT, &elements,
                      &nulls, &count);
    for (int i = 0; i < count; ++i) {
        if (!nulls[i])
            out.push_back(TextDatumGetCString(elements[i]));
    }
    return out;
}

// Plain values read inside call_postgres(), turned into routes outside it.
struct RouteRow {
    std::vector<std::string> methods;
    std::string path_pattern;
    std::vector<std::string> roles;
    std::string policy;
    std::string key;
    std::string tier_claim;
};

std::vector<RouteRow> read_routes(FunctionCallInfo fcinfo) {
    std::vector<RouteRow> rows;
    call_postgres([&] {
        if (SPI_connect() != SPI_OK_CONNECT)
            elog(ERROR, "ratelimit: SPI_connect failed");
        const int status =
            SPI_execute_plan(routes_query.plan_for(fcinfo), nullptr, nullptr, true, 0);
        if (status != SPI_OK_SELECT)
            elog(ERROR, "ratelimit: reading request_routes failed: %s",
                 SPI_result_code_string(status));
        for (uint64 i = 0; i < SPI_processed; ++i) {
            HeapTuple tuple = SPI_tuptable->vals[i];
            TupleDesc desc = SPI_tuptable->tupdesc;
            bool null = false;
            RouteRow row;
            Datum methods = SPI_getbinval(tuple, desc, 1, &null);
            if (!null)
                row.methods = text_array_strings(methods);
            Datum pattern = SPI_getbinval(tuple, desc, 2, &null);
            if (!null)
                row.path_pattern = TextDatumGetCString(pattern);
            Datum roles = SPI_getbinval(tuple, desc, 3, &null);
            if (!null)
                row.roles = text_array_strings(roles);
            Datum policy = SPI_getbinval(tuple, desc, 4, &null);
            if (!null)
                row.policy = TextDatumGetCString(policy);
            Datum key = SPI_getbinval(tuple, desc, 5, &null);
            if (!null)
                row.key = TextDatumGetCString(key);
            Datum tier_claim = SPI_getbinval(tuple, desc, 6, &null);
            if (!null)
                row.tier_claim = TextDatumGetCString(tier_claim);
            rows.push_back(std::move(row));
        }
        SPI_finish();
    });
    return rows;
}

// A setting PostgREST publishes for the request; empty when unset.
std::string request_setting(const char* name) {
    std::string value;
    call_postgres([&] {
        const char* text = GetConfigOption(name, true, false);
        if (text != nullptr)
            value = text;
    });
    return value;
}

// The value of header `name` (lower case, as PostgREST publishes them) in request.headers.
std::optional<std::string> request_header(const std::string& headers, const std::string& name) {
    if (headers.empty() || name.empty())
        return std::nullopt;
    std::optional<std::string> value;
    call_postgres([&] {
        Jsonb* object =
            DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(headers.c_str())));
        if (!JB_ROOT_IS_OBJECT(object))
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("request.headers must be a JSON object")));
        JsonbValue key;
        key.type = jbvString;
        key.val.string.val = const_cast<char*>(name.data());
        key.val.string.len = static_cast<int>(name.size());
        JsonbValue* found = findJsonbValueFromContainer(&object->root, JB_FOBJECT, &key);
        if (found != nullptr && found->type == jbvString)
            value = std::string(found->val.string.val, found->val.string.len);
    });
    return value;
}

// A client address, parsed; its canonical text and an inet datum for the access lists.
struct ClientAddress {
    std::string text;
    Datum inet_value = 0;
};

std::optional<ClientAddress> client_address(std::string_view hop) {
    if (hop.empty() || hop.size() > 64)
        return std::nullopt;
    std::string copy(hop);
    unsigned char bytes[16];
    int family = 0;
    if (inet_pton(AF_INET, copy.c_str(), bytes) == 1)
        family = 4;
    else if (inet_pton(AF_INET6, copy.c_str(), bytes) == 1)
        family = 6;
    else
        return std::nullopt;
    char canonical[INET6_ADDRSTRLEN];
    if (inet_ntop(family == 4 ? AF_INET : AF_INET6, bytes, canonical, sizeof canonical) == nullptr)
        return std::nullopt;
    ClientAddress address;
    address.text = canonical;
    call_postgres([&] {
        inet* value = static_cast<inet*>(palloc0(sizeof(inet)));
        ip_family(value) = family == 4 ? PGSQL_AF_INET : PGSQL_AF_INET6;
        ip_bits(value) = family == 4 ? 32 : 128;
        std::memcpy(ip_addr(value), bytes, family == 4 ? 4 : 16);
        SET_INET_VARSIZE(value);
        address.inet_value = InetPGetDatum(value);
    });
    return address;
}

Datum text_array(const std::vector<std::string>& values) {
    Datum result = 0;
    call_postgres([&] {
        Datum* elements = static_cast<Datum*>(palloc(sizeof(Datum) * values.size()));
        for (std::size_t i = 0; i < values.size(); ++i)
            elements[i] = PointerGetDatum(
                cstring_to_text_with_len(values[i].data(), static_cast<int>(values[i].size())));
        result = PointerGetDatum(construct_array(elements, static_cast<int>(values.size()), TEXTOID,
                                                 -1, false, TYPALIGN_INT));
    });
    return result;
}

// check_http's answer, as plain values.
struct HttpAnswer {
    bool allowed = true;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string policy;
    std::int64_t limit = 0;
    std::int64_t period_ms = 0;
    std::int64_t retry_after_ms = 0;
};

// The request's tier: the first of the applied routes' tier claims that the JWT claims hold, if
// its value names a tier of ratelimit.tiers; none otherwise. Claims come from a JWT PostgREST has
// verified, so a tier in them is as trustworthy as the issuer that put it there.
std::optional<std::string> request_tier(const RouteChecks& checks) {
    for (const std::string& claim : checks.tier_claims) {
        const std::optional<std::string> value = jwt_claim_string(tier_claim_members(claim));
        if (!value)
            continue;
        Oid schema = InvalidOid;
        call_postgres([&] { schema = extension_schema(); });
        if (policy_catalog(schema).tier(*value) == nullptr)
            return std::nullopt;
        return value;
    }
    return std::nullopt;
}

// Calls ratelimit.check_http (in the extension's schema), as PostgREST's role could not: it is
// granted to service_role only.
HttpAnswer check_http(const RouteChecks& checks, const std::optional<std::string>& tier,
                      const std::optional<Uuid>& user, const std::optional<ClientAddress>& ip) {
    const Datum policies = text_array(checks.policies);
    const Datum keys = text_array(checks.keys);
    HttpAnswer answer;
    call_postgres([&] {
        const Oid schema = extension_schema();
        Oid types[8] = {TEXTARRAYOID, TEXTARRAYOID, INT4OID, TEXTOID,
                        INETOID,      UUIDOID,      TEXTOID, TEXTOID};
        List* name =
            list_make2(makeString(get_namespace_name(schema)), makeString(pstrdup("check_http")));
        const Oid function = LookupFuncName(name, 8, types, false);
        FmgrInfo flinfo;
        fmgr_info(function, &flinfo);
        LOCAL_FCINFO(call, 8);
        InitFunctionCallInfoData(*call, &flinfo, 8, InvalidOid, nullptr, nullptr);
        for (int i = 0; i < 8; ++i) {
            call->args[i].value = 0;
            call->args[i].isnull = false;
        }
        call->args[0].value = policies;
        call->args[1].value = keys;
        call->args[2].value = Int32GetDatum(1);
        if (tier)
            call->args[3].value = CStringGetTextDatum(tier->c_str());
        else
            call->args[3].isnull = true;
        if (ip)
            call->args[4].value = ip->inet_value;
        else
            call->args[4].isnull = true;
        if (user) {
            pg_uuid_t* id = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
            std::memcpy(id->data, user->data(), UUID_LEN);
            call->args[5].value = UUIDPGetDatum(id);
        } else {
            call->args[5].isnull = true;
        }
        call->args[6].value = CStringGetTextDatum("unix");
        call->args[7].value = CStringGetTextDatum("error_message");
        Datum result = FunctionCallInvoke(call);
        if (call->isnull)
            elog(ERROR, "ratelimit: check_http returned NULL");
        Jsonb* object = DatumGetJsonbP(result);
        auto member = [&](JsonbContainer* container, const char* key) {
            JsonbValue name_value;
            name_value.type = jbvString;
            name_value.val.string.val = const_cast<char*>(key);
            name_value.val.string.len = static_cast<int>(std::strlen(key));
            return findJsonbValueFromContainer(container, JB_FOBJECT, &name_value);
        };
        JsonbValue* allowed = member(&object->root, "allowed");
        answer.allowed = allowed != nullptr && allowed->type == jbvBool && allowed->val.boolean;
        JsonbValue* headers = member(&object->root, "headers");
        if (headers != nullptr && headers->type == jbvBinary) {
            JsonbIterator* it = JsonbIteratorInit(headers->val.binary.data);
            JsonbValue value;
            JsonbIteratorToken token;
            std::string key;
            while ((token = JsonbIteratorNext(&it, &value, true)) != WJB_DONE) {
                if (token == WJB_KEY) {
                    key.assign(value.val.string.val, value.val.string.len);
                } else if (token == WJB_VALUE && value.type == jbvString) {
                    answer.headers.emplace_back(
                        key, std::string(value.val.string.val, value.val.string.len));
                } else if (token == WJB_VALUE && value.type == jbvNumeric) {
                    answer.headers.emplace_back(
                        key, DatumGetCString(DirectFunctionCall1(
                                 numeric_out, NumericGetDatum(value.val.numeric))));
                }
            }
        }
        JsonbValue* decision = member(&object->root, "decision");
        if (decision != nullptr && decision->type == jbvBinary) {
            auto number = [&](const char* key) -> std::int64_t {
                JsonbValue* found = member(decision->val.binary.data, key);
                if (found == nullptr || found->type != jbvNumeric)
                    return 0;
                return DatumGetInt64(
                    DirectFunctionCall1(numeric_int8, NumericGetDatum(found->val.numeric)));
            };
            JsonbValue* policy = member(decision->val.binary.data, "policy");
            if (policy != nullptr && policy->type == jbvString)
                answer.policy.assign(policy->val.string.val, policy->val.string.len);
            answer.limit = number("limit");
            answer.period_ms = number("period_ms");
            answer.retry_after_ms = number("retry_after_ms");
        }
    });
    return answer;
}

// `text` as a JSON string, quotes included.
std::string json_string(const std::string& text) {
    std::string out;
    call_postgres([&] {
        StringInfoData buffer;
        initStringInfo(&buffer);
        escape_json(&buffer, text.c_str());
        out.assign(buffer.data, buffer.len);
    });
    return out;
}

// PostgREST's form of response.headers: [{"Name": "value"}, ...]; appended to what an earlier
// step of the transaction set.
void add_response_headers(const std::vector<std::pair<std::string, std::string>>& headers) {
    if (headers.empty())
        return;
    std::string ours;
    for (const auto& [name, value] : headers) {
        ours += ours.empty() ? "" : ", ";
        ours += "{" + json_string(name) + ": " + json_string(value) + "}";
    }
    std::string existing = request_setting("response.headers");
    std::size_t end = existing.find_last_of(']');
    std::string combined;
    if (!existing.empty() && existing.front() == '[' && end != std::string::npos) {
        std::string inside = existing.substr(1, end - 1);
        const bool empty = inside.find_first_not_of(" \t\r\n") == std::string::npos;
        combined = "[" + (empty ? std::string() : inside + ", ") + ours + "]";
    } else {
        combined = "[" + ours + "]";
    }
    call_postgres([&] {
        (void)set_config_option("response.headers", combined.c_str(), PGC_USERSET, PGC_S_SESSION,
                                GUC_ACTION_LOCAL, true, 0, false);
    });
}

[[noreturn]] void raise_too_many_requests(const HttpAnswer& answer) {
    const std::int64_t seconds = (answer.retry_after_ms + 999) / 1000;
    std::string details = "Rate limit exceeded";
    if (!answer.policy.empty() && answer.limit > 0 && answer.period_ms > 0) {
        details = "Policy " + answer.policy + " allows " +
                  describe_limit(answer.limit, answer.period_ms) + ".";
    }
    const std::string message =
        "{\"code\": \"RATE_LIMITED\", \"message\": \"Too many requests\", \"details\": " +
        json_string(details) + ", \"hint\": " +
        json_string("Retry after " + std::to_string(seconds < 1 ? 1 : seconds) + " seconds.") + "}";
    std::string headers;
    for (const auto& [name, value] : answer.headers) {
        headers += headers.empty() ? "" : ", ";
        headers += json_string(name) + ": " + json_string(value);
    }
    const std::string detail =
        "{\"status\": 429, \"status_text\": \"Too Many Requests\", \"headers\": {" + headers + "}}";
    call_postgres([&] {
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('P', 'G', 'R', 'S', 'T')),
                 errmsg_internal("%s", message.c_str()), errdetail_internal("%s", detail.c_str())));
    });
    throw std::logic_error("unreachable");
}

Datum pre_request_body(FunctionCallInfo fcinfo) {
    RouteRequest request;
    request.method = request_setting("request.method");
    if (request.method.empty())
        return static_cast<Datum>(0);  // not a PostgREST request
    request.path = request_setting("request.path");
    call_postgres([&] { request.role = GetUserNameFromId(GetOuterUserId(), false); });

    const std::vector<RouteRow> rows = read_routes(fcinfo);
    std::vector<RequestRoute> routes;
    routes.reserve(rows.size());
    for (const RouteRow& row : rows) {
        RequestRoute route;
        route.methods = row.methods;
        route.path_pattern = row.path_pattern;
        route.roles = row.roles;
        route.policy = row.policy;
        route.key = parse_route_key("key", row.key);
        route.tier_claim = row.tier_claim;
        routes.push_back(std::move(route));
    }

    // The sub as text keys the routes whatever its form; a malformed identity is refused only
    // if a matching route counts by user (below), so a request no such route matches passes.
    std::optional<Subject> subject;
    std::optional<ArgumentError> identity_error;
    try {
        subject = jwt_subject();
    } catch (const ArgumentError& error) {
        identity_error = error;
    }
    if (subject)
        request.user = subject->text;
    std::optional<ClientAddress> ip;
    const std::string header_name =
        setting::client_ip_header != nullptr ? setting::client_ip_header : "";
    if (const std::optional<std::string> forwarded =
            request_header(request_setting("request.headers"), header_name)) {
        ip = client_address(forwarded_hop(*forwarded, setting::client_ip_trusted_proxies));
    }
    if (ip)
        request.address = ip->text;

    const RouteChecks checks = match_routes(routes, request);
    if (checks.policies.empty())
        return static_cast<Datum>(0);
    if (identity_error && checks.uses_user)
        throw *identity_error;
    // The access list keeps users as uuid: a sub of another form matches no user entry.
    const std::optional<Uuid> user = subject ? parse_uuid(subject->text) : std::nullopt;
    const HttpAnswer answer = check_http(checks, request_tier(checks), user, ip);
    if (!answer.allowed)
        raise_too_many_requests(answer);
    add_response_headers(answer.headers);
    return static_cast<Datum>(0);
}

// ratelimit.client_address(): the request's client address as pre_request() keys it (the
// header ratelimit.client_ip_header names, the hop ratelimit.client_ip_trusted_proxies counts
// from the right); NULL outside a request, without the header, or with no address there.
Datum client_address_body(FunctionCallInfo fcinfo) {
    const std::string header_name =
        setting::client_ip_header != nullptr ? setting::client_ip_header : "";
    std::optional<ClientAddress> ip;
    if (const std::optional<std::string> forwarded =
            request_header(request_setting("request.headers"), header_name))
        ip = client_address(forwarded_hop(*forwarded, setting::client_ip_trusted_proxies));
    if (!ip) {
        fcinfo->isnull = true;
        return static_cast<Datum>(0);
    }
    return ip->inet_value;
}

// ratelimit.jwt_subject(): the request's caller as auth.uid() finds it, as text in any identity
// provider's form; NULL for an anonymous caller; malformed claims are an error.
Datum jwt_subject_body(FunctionCallInfo fcinfo) {
    const std::optional<Subject> subject = jwt_subject();
    if (!subject) {
        fcinfo->isnull = true;
        return static_cast<Datum>(0);
    }
    Datum text_value = 0;
    call_postgres([&] { text_value = CStringGetTextDatum(subject->text.c_str()); });
    return text_value;
}

}  // namespace

bool check_client_ip_header(char** newval, void**, GucSource) {
    for (const char* c = *newval; *c != '\0'; ++c) {
        const bool ok =
            (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_';
        if (!ok) {
            GUC_check_errdetail(
                "ratelimit.client_ip_header must be a header name in lower case, as PostgREST "
                "publishes them (letters, digits, - and _).");
            return false;
        }
    }
    return true;
}

}  // namespace ratelimit::pg

RATELIMIT_SQL_FUNCTION(ratelimit_pre_request, ratelimit::pg::pre_request_body)

RATELIMIT_SQL_FUNCTION(ratelimit_client_address, ratelimit::pg::client_address_body)
RATELIMIT_SQL_FUNCTION(ratelimit_jwt_subject, ratelimit::pg::jwt_subject_body)
