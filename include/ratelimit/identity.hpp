// The caller's identity as Supabase's auth.uid() sees it: the `sub` claim of the request JWT,
// which PostgREST publishes as the settings request.jwt.claim.sub (older) and
// request.jwt.claims (a JSON object).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ratelimit {

using Uuid = std::array<std::uint8_t, 16>;

// Parses the canonical 8-4-4-4-12 form or 32 bare hex digits, either case.
std::optional<Uuid> parse_uuid(std::string_view text);

// The canonical form: 8-4-4-4-12 lower-case hex digits.
std::string uuid_text(const Uuid& id);

// What the request's claims (request.jwt.claims, parsed as JSON by the PostgreSQL layer with
// PostgreSQL's own parser) hold under the top-level member "sub"; the last one wins when the
// name repeats, as in jsonb.
struct SubClaim {
    enum class Kind { kNotAnObject, kAbsent, kNull, kString, kOtherValue } kind = Kind::kAbsent;
    std::string text;  // the decoded string when kind == kString
};

// Where the caller's sub came from: the setting to name in an error.
struct Subject {
    std::string text;
    const char* setting = "";  // "request.jwt.claim.sub" or "request.jwt.claims"
};

// The caller's subject, found in the order auth.uid() looks: a non-empty request.jwt.claim.sub
// first (nullptr: setting absent), then the "sub" member of a non-empty request.jwt.claims
// (`claims_sub` empty: that setting absent or empty). The sub is text as the identity provider
// wrote it: Supabase's UUIDs, and Auth0's "auth0|…", Firebase's, Clerk's and Cognito's ids
// alike. Returns nullopt for an anonymous caller (no sub, or sub is JSON null). Throws
// ArgumentError naming the setting when the claims are not a JSON object or the sub is empty or
// not a string: a malformed identity is never treated as anonymous.
std::optional<Subject> resolve_subject(const char* claim_sub_setting,
                                       const std::optional<SubClaim>& claims_sub);

// The subject where it is kept as a uuid (the Supabase apps' drop-ins, whose tables and
// parameters are auth.uid()'s type): throws ArgumentError naming the setting when it is not a
// UUID. Text keys (policies, routes) take any subject: see resolve_subject.
std::optional<Uuid> subject_uuid(const std::optional<Subject>& subject);

// resolve_subject, then subject_uuid.
std::optional<Uuid> resolve_caller(const char* claim_sub_setting,
                                   const std::optional<SubClaim>& claims_sub);

// Who asks to act on a user id: whether the current role is one PostgREST switches to for a
// request (a JWT role: anon, authenticated, ...), and the caller resolve_caller found.
struct UserIdCaller {
    bool jwt_role = false;
    std::optional<Uuid> sub;
};

// Throws ArgumentError (42501) naming `argument` unless `caller` may act on `user_id`: a caller
// with a sub may only name its own id; a JWT role without a sub may name none, since a request
// without a sub (anon key, a token without sub) proves no user. Other roles without a sub
// (service_role, server code) are trusted to name any user.
void require_may_act_on(const std::string& argument, const UserIdCaller& caller,
                        const Uuid& user_id);

}  // namespace ratelimit
