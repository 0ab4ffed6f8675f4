// ratelimit.pre_request(), PostgREST's db-pre-request hook (src/pg/postgrest/pre_request.cpp).
#pragma once

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// The check hook of ratelimit.client_ip_header (pg/module/settings.cpp): a header name in lower
// case.
bool check_client_ip_header(char** newval, void** extra, GucSource source);

}  // namespace ratelimit::pg
