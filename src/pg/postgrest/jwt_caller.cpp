#include "pg/postgrest/jwt_caller.hpp"

#include <algorithm>

#include "pg/compat/compat.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/bridge/settings.hpp"

extern "C" {
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/varlena.h"
}

namespace ratelimit::pg {

// A list of role names, as search_path is written.
bool check_jwt_roles(char** newval, void**, GucSource) {
    char* copy = pstrdup(*newval);
    List* names = nullptr;
    bool ok = SplitIdentifierString(copy, ',', &names);
    list_free(names);
    pfree(copy);
    if (!ok)
        GUC_check_errdetail("ratelimit.jwt_roles must be a comma-separated list of role names.");
    return ok;
}

namespace {

// What the parser's callbacks collect: plain values only (they run inside call_postgres()).
struct ClaimsScan {
    int depth = 0;
    bool top_is_object = false;
    bool in_sub = false;  // the next value at depth 1 is "sub"'s
    SubClaim::Kind kind = SubClaim::Kind::kAbsent;
    char* text = nullptr;  // palloc'd, when kind is kString
};

// What a semantic action returns differs between majors (pg/compat/compat.hpp).
#define CLAIMS_ACTION_RESULT RATELIMIT_JSON_ACTION_RESULT
#define CLAIMS_ACTION_DONE RATELIMIT_JSON_ACTION_DONE

// A value that is an object or an array: if it is "sub"'s, sub is neither a string nor null.
void nested_value(ClaimsScan* scan) {
    if (scan->depth == 1 && scan->in_sub) {
        scan->kind = SubClaim::Kind::kOtherValue;
        scan->in_sub = false;
    }
}

CLAIMS_ACTION_RESULT on_object_start(void* state) {
    auto* scan = static_cast<ClaimsScan*>(state);
    if (scan->depth == 0)
        scan->top_is_object = true;
    nested_value(scan);
    ++scan->depth;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT on_array_start(void* state) {
    auto* scan = static_cast<ClaimsScan*>(state);
    nested_value(scan);
    ++scan->depth;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT on_end(void* state) {
    --static_cast<ClaimsScan*>(state)->depth;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT on_field_start(void* state, char* name, bool) {
    auto* scan = static_cast<ClaimsScan*>(state);
    if (scan->depth == 1)
        scan->in_sub = strcmp(name, "sub") == 0;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT on_scalar(void* state, char* token, JsonTokenType type) {
    auto* scan = static_cast<ClaimsScan*>(state);
    if (scan->depth == 1 && scan->in_sub) {
        scan->in_sub = false;
        scan->text = nullptr;
        if (type == JSON_TOKEN_STRING) {
            scan->kind = SubClaim::Kind::kString;
            scan->text = token;
        } else if (type == JSON_TOKEN_NULL) {
            scan->kind = SubClaim::Kind::kNull;
        } else {
            scan->kind = SubClaim::Kind::kOtherValue;
        }
    }
    CLAIMS_ACTION_DONE;
}

// Claims nested deeper than this are refused before parsing: PostgreSQL's parser recurses per
// level and would stop on its stack depth limit (an error that names no setting).
constexpr int kMaxClaimsDepth = 512;

// The deepest nesting of objects and arrays in `json`, outside strings.
int nesting_depth(const char* json) {
    int depth = 0;
    int deepest = 0;
    bool in_string = false;
    for (const char* c = json; *c != '\0'; ++c) {
        if (in_string) {
            if (*c == '\\' && c[1] != '\0')
                ++c;
            else if (*c == '"')
                in_string = false;
        } else if (*c == '"') {
            in_string = true;
        } else if (*c == '{' || *c == '[') {
            deepest = std::max(deepest, ++depth);
        } else if (*c == '}' || *c == ']') {
            --depth;
        }
    }
    return deepest;
}

// What request.jwt.claims says of "sub", by PostgreSQL's JSON parser, which reports malformed
// input as a result instead of raising it. PostgreSQL code: call inside call_postgres().
void scan_claims(const char* claims, ClaimsScan* scan) {
    if (nesting_depth(claims) > kMaxClaimsDepth) {
        scan->top_is_object = false;
        return;
    }
    JsonLexContext* lex = compat::json_lexer(claims, strlen(claims), GetDatabaseEncoding());
    JsonSemAction actions;
    memset(&actions, 0, sizeof actions);
    actions.semstate = scan;
    actions.object_start = on_object_start;
    actions.object_end = on_end;
    actions.array_start = on_array_start;
    actions.array_end = on_end;
    actions.object_field_start = on_field_start;
    actions.scalar = on_scalar;
    if (pg_parse_json(lex, &actions) != JSON_SUCCESS)
        scan->top_is_object = false;
}

// What a scan for one claim by its path collects: plain values only (the callbacks run inside
// call_postgres()).
constexpr int kMaxClaimPath = 8;
struct ClaimPathScan {
    const char* const* path = nullptr;  // the member names, outermost first
    int path_length = 0;
    int depth = 0;
    // at[d]: the member name of the value at depth d + 1 (within d + 1 open containers); null
    // for an array's element.
    const char* at[kMaxClaimPath] = {};
    char* value = nullptr;  // palloc'd: the last string found at the path
};

bool at_path(const ClaimPathScan* scan) {
    if (scan->depth != scan->path_length)
        return false;
    for (int i = 0; i < scan->path_length; ++i) {
        if (scan->at[i] == nullptr || strcmp(scan->at[i], scan->path[i]) != 0)
            return false;
    }
    return true;
}

CLAIMS_ACTION_RESULT path_start(void* state) {
    ++static_cast<ClaimPathScan*>(state)->depth;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT path_end(void* state) {
    --static_cast<ClaimPathScan*>(state)->depth;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT path_field_start(void* state, char* name, bool) {
    auto* scan = static_cast<ClaimPathScan*>(state);
    // A member of the object at depth d names the value at depth d + 1.
    if (scan->depth >= 1 && scan->depth <= kMaxClaimPath)
        scan->at[scan->depth - 1] = name;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT path_array_element_start(void* state, bool) {
    auto* scan = static_cast<ClaimPathScan*>(state);
    // An array element has no member name: nothing inside it is at a path of names.
    if (scan->depth >= 1 && scan->depth <= kMaxClaimPath)
        scan->at[scan->depth - 1] = nullptr;
    CLAIMS_ACTION_DONE;
}

CLAIMS_ACTION_RESULT path_scalar(void* state, char* token, JsonTokenType type) {
    auto* scan = static_cast<ClaimPathScan*>(state);
    // A scalar is the value of the member just named, at the current depth.
    if (type == JSON_TOKEN_STRING && at_path(scan))
        scan->value = token;
    CLAIMS_ACTION_DONE;
}

}  // namespace

std::optional<std::string> jwt_claim_string(const std::vector<std::string>& path) {
    if (path.empty() || static_cast<int>(path.size()) > kMaxClaimPath)
        return std::nullopt;
    const char* names[kMaxClaimPath];
    for (std::size_t i = 0; i < path.size(); ++i)
        names[i] = path[i].c_str();
    ClaimPathScan scan;
    scan.path = names;
    scan.path_length = static_cast<int>(path.size());
    bool parsed = false;
    call_postgres([&] {
        const char* claims = GetConfigOption("request.jwt.claims", true, false);
        if (claims == nullptr || claims[0] == '\0' || nesting_depth(claims) > kMaxClaimsDepth)
            return;
        JsonLexContext* lex = compat::json_lexer(claims, strlen(claims), GetDatabaseEncoding());
        JsonSemAction actions;
        memset(&actions, 0, sizeof actions);
        actions.semstate = &scan;
        actions.object_start = path_start;
        actions.object_end = path_end;
        actions.array_start = path_start;
        actions.array_end = path_end;
        actions.object_field_start = path_field_start;
        actions.array_element_start = path_array_element_start;
        actions.scalar = path_scalar;
        parsed = pg_parse_json(lex, &actions) == JSON_SUCCESS;
    });
    if (!parsed || scan.value == nullptr)
        return std::nullopt;
    return std::string(scan.value);
}

std::optional<Subject> jwt_subject() {
    const char* claim_sub = nullptr;
    const char* claims = nullptr;
    ClaimsScan scan;
    call_postgres([&] {
        claim_sub = GetConfigOption("request.jwt.claim.sub", true, false);
        claims = GetConfigOption("request.jwt.claims", true, false);
        // The claims matter only when the older single-claim setting is empty.
        if ((claim_sub == nullptr || claim_sub[0] == '\0') && claims != nullptr &&
            claims[0] != '\0')
            scan_claims(claims, &scan);
    });
    std::optional<SubClaim> sub;
    if (claims != nullptr && claims[0] != '\0') {
        sub.emplace();
        sub->kind = scan.top_is_object ? scan.kind : SubClaim::Kind::kNotAnObject;
        if (scan.text != nullptr)
            sub->text = scan.text;
    }
    return resolve_subject(claim_sub, sub);
}

std::optional<Uuid> jwt_caller() {
    return subject_uuid(jwt_subject());
}

bool in_jwt_role() {
    bool found = false;
    call_postgres([&] {
        const char* role = GetUserNameFromId(GetOuterUserId(), true);
        char* copy = pstrdup(setting::jwt_roles != nullptr ? setting::jwt_roles : "");
        List* names = nullptr;
        // The list was checked when set; a role that no longer exists simply never matches.
        if (role != nullptr && SplitIdentifierString(copy, ',', &names)) {
            ListCell* cell;
            foreach (cell, names) {
                if (strcmp(static_cast<const char*>(lfirst(cell)), role) == 0)
                    found = true;
            }
        }
        list_free(names);
        pfree(copy);
    });
    return found;
}

UserIdCaller user_id_caller() {
    UserIdCaller caller;
    caller.sub = jwt_caller();
    caller.jwt_role = in_jwt_role();
    return caller;
}

}  // namespace ratelimit::pg
