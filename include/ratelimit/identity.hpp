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

// What a JSON object holds under one top-level member name.
struct JsonMember {
    enum class Kind { kAbsent, kNull, kString, kOtherValue } kind = Kind::kAbsent;
    std::string text;  // the decoded string when kind == kString
};

// Looks up `name` among the top-level members of the JSON object `json` (the last one wins
// when a name repeats, as in jsonb). Returns nullopt when `json` is not a valid JSON object.
std::optional<JsonMember> find_top_level_member(std::string_view json, std::string_view name);

// Resolves the caller exactly in the order auth.uid() does: a non-empty
// request.jwt.claim.sub first, then the "sub" member of a non-empty request.jwt.claims.
// Either argument may be nullptr (setting absent). Returns nullopt for an anonymous caller
// (no sub, or sub is JSON null). Throws ArgumentError naming the setting when the claims are
// not a JSON object or the sub is present but not a UUID: a malformed identity is never
// treated as anonymous.
std::optional<Uuid> resolve_caller(const char* claim_sub_setting, const char* claims_setting);

}  // namespace ratelimit
