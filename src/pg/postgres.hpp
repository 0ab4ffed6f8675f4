// The one door from C++ into PostgreSQL's C headers. Only files under src/pg/ include it; the
// core (src/core/, include/ratelimit/) never does.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}
