// ratelimit.pre_request(), PostgREST's db-pre-request hook (src/pg/pre_request.cpp).
#pragma once

namespace ratelimit::pg {

// Registers ratelimit.client_ip_header; called from _PG_init in every process.
void define_pre_request_settings();

}  // namespace ratelimit::pg
