// The caller of the current request as Supabase's auth.uid() sees it, read from the settings
// PostgREST sets for each request (see ratelimit/identity.hpp for the rules).
#pragma once

#include <optional>

#include "ratelimit/identity.hpp"

namespace ratelimit::pg {

// nullopt for an anonymous caller; throws ArgumentError for a malformed identity.
std::optional<Uuid> jwt_caller();

// Whether the session's current role (the one SET ROLE chose, as PostgREST does per request,
// not the owner of a SECURITY DEFINER function in between) is one of ratelimit.jwt_roles.
bool in_jwt_role();

// The caller as require_may_act_on (ratelimit/identity.hpp) judges it.
UserIdCaller user_id_caller();

// Declares ratelimit.jwt_roles.
void define_jwt_settings();

}  // namespace ratelimit::pg
