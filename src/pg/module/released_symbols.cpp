// The C symbols that released install and update scripts name, kept as they were. An entry
// symbol is named after its SQL function (<extension>_<function>), but a database installed or
// updated by an older script holds the older name in pg_proc (its 0.6.0 drop-ins, left in place
// by the update to 0.7.0, go on calling them), and the chain of update scripts creates functions
// by those names before the last one points them at the current symbols. Each old name calls its
// current symbol, which carries the error guard.
#include "pg/bridge/guard.hpp"
#include "pg/bridge/postgres.hpp"

#define RATELIMIT_RELEASED_SYMBOL(released, current) \
    extern "C" {                                     \
    Datum current(PG_FUNCTION_ARGS);                 \
    PG_FUNCTION_INFO_V1(released);                   \
    Datum released(PG_FUNCTION_ARGS) {               \
        return current(fcinfo);                      \
    }                                                \
    }

// ratelimit 0.1.0 to 0.6.0
RATELIMIT_RELEASED_SYMBOL(rl_clock_now, ratelimit_clock_now)
// the drop-ins of ratelimit 0.1.0 to 0.6.0, now the extensions ratelimit_<app>
RATELIMIT_RELEASED_SYMBOL(rl_check_rate_limit, ratelimit_rpc_limits_check_rate_limit)
RATELIMIT_RELEASED_SYMBOL(rl_check_rate_limit_for_user,
                          ratelimit_rpc_limits_check_rate_limit_for_user)
RATELIMIT_RELEASED_SYMBOL(rl_increment_rate_limit, ratelimit_endpoint_limits_increment_rate_limit)
RATELIMIT_RELEASED_SYMBOL(rl_check_rate_limit_buckets,
                          ratelimit_sliding_window_limits_check_rate_limit)
RATELIMIT_RELEASED_SYMBOL(rl_check_rate_limit_tiers,
                          ratelimit_sliding_window_limits_check_rate_limit_tiers)
