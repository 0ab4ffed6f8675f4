// A statement prepared once per backend and kept (SPI_prepare + SPI_keepplan), always run with
// bound parameters. It is prepared for the schema the calling function lives in, so that the
// extension's objects are found wherever CREATE EXTENSION put them, and prepared again only if
// that schema changes (extension dropped and created elsewhere).
#pragma once

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

class SpiStatement {
  public:
    // `sql_template` holds one %s, replaced by the quoted schema name.
    SpiStatement(const char* sql_template, int nargs, const Oid* argtypes)
        : sql_template_(sql_template), nargs_(nargs), argtypes_(argtypes) {}

    // The kept plan for the schema of the function being called. PostgreSQL code: call it
    // inside call_postgres(), after SPI_connect().
    SPIPlanPtr plan_for(FunctionCallInfo fcinfo);

  private:
    const char* sql_template_;
    int nargs_;
    const Oid* argtypes_;
    Oid function_oid_ = InvalidOid;
    Oid schema_oid_ = InvalidOid;
    SPIPlanPtr plan_ = nullptr;
};

}  // namespace ratelimit::pg
