#include "pg/jwt_caller.hpp"

#include "pg/guard.hpp"

namespace ratelimit::pg {

std::optional<Uuid> jwt_caller() {
    const char* claim_sub = nullptr;
    const char* claims = nullptr;
    call_postgres([&] {
        claim_sub = GetConfigOption("request.jwt.claim.sub", true, false);
        claims = GetConfigOption("request.jwt.claims", true, false);
    });
    return resolve_caller(claim_sub, claims);
}

}  // namespace ratelimit::pg
