// Module entry: the library's magic block and _PG_init, which only asks each part to register
// what it owns.
#include "pg/clock.hpp"
#include "pg/postgres.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);

void _PG_init(void) {
    ratelimit::pg::define_clock_settings();
#if PG_VERSION_NUM >= 150000
    MarkGUCPrefixReserved("ratelimit");
#else
    EmitWarningsOnPlaceholders("ratelimit");
#endif
}
}
