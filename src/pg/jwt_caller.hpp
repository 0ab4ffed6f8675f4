// The caller of the current request as Supabase's auth.uid() sees it, read from the settings
// PostgREST sets for each request (see ratelimit/identity.hpp for the rules).
#pragma once

#include <optional>

#include "ratelimit/identity.hpp"

namespace ratelimit::pg {

// nullopt for an anonymous caller; throws ArgumentError for a malformed identity.
std::optional<Uuid> jwt_caller();

}  // namespace ratelimit::pg
