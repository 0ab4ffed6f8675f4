// The door from C++ into PostgreSQL's C headers: postgres.h first (PostgreSQL requires it), then
// the headers most files use. Only files under src/pg/ include it; the core (src/core/,
// include/ratelimit/) never does. A file that needs more of PostgreSQL includes this first and
// opens one extern "C" block for the rest (scripts/check-layout.sh checks both).
#pragma once

// PostgreSQL's port.h redefines snprintf and friends as macros; the C++ standard headers must
// be seen first, or their std:: declarations break.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"
}
