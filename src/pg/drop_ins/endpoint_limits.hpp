// The endpoint drop-in's arguments (src/pg/drop_ins/endpoint_limits.cpp), read for its
// increment_rate_limit and for the router's check of them (src/pg/router/drop_ins.cpp), which
// must refuse exactly what the call refuses.
#pragma once

#include <cstdint>

#include "pg/bridge/postgres.hpp"
#include "ratelimit/aligned_window.hpp"

namespace ratelimit::pg {

// increment_rate_limit's arguments, checked, the window (from the policy endpoint.<p_endpoint>
// when there is one) and the caller rule, before anything is written.
struct IncrementCall {
    Datum user_id;
    Datum endpoint;
    std::int32_t increment;
    AlignedWindow window;
};
IncrementCall read_increment_call(FunctionCallInfo fcinfo);

}  // namespace ratelimit::pg
