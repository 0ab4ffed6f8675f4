// The caller of the current request as Supabase's auth.uid() sees it, read from the settings
// PostgREST sets for each request (see ratelimit/identity.hpp for the rules).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/identity.hpp"

namespace ratelimit::pg {

// The request's subject as text (any identity provider's form); nullopt for an anonymous
// caller; throws ArgumentError for malformed claims.
std::optional<Subject> jwt_subject();

// The subject as a uuid, for the Supabase apps' uuid columns and parameters: nullopt for an
// anonymous caller; throws ArgumentError for malformed claims or a sub that is not a UUID.
std::optional<Uuid> jwt_caller();

// The string at `path` (member names, outermost first) of the request's JWT claims; nullopt when
// the claims are missing or not JSON, or hold no string there (the last one wins when a name
// repeats, as in jsonb).
std::optional<std::string> jwt_claim_string(const std::vector<std::string>& path);

// Whether the session's current role (the one SET ROLE chose, as PostgREST does per request,
// not the owner of a SECURITY DEFINER function in between) is one of ratelimit.jwt_roles.
bool in_jwt_role();

// The caller as require_may_act_on (ratelimit/identity.hpp) judges it.
UserIdCaller user_id_caller();

// The check hook of ratelimit.jwt_roles (pg/module/settings.cpp): a list of role names.
bool check_jwt_roles(char** newval, void** extra, GucSource source);

}  // namespace ratelimit::pg
