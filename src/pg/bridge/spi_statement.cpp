#include "pg/bridge/spi_statement.hpp"

namespace ratelimit::pg {

SPIPlanPtr SpiStatement::plan_for(FunctionCallInfo fcinfo) {
    Oid function_oid = fcinfo->flinfo->fn_oid;
    if (plan_ != nullptr && function_oid == function_oid_) {
        return plan_;
    }
    // The calling function's schema on purpose, not extension_schema(): the drop-ins' tables
    // (rpc_rate_limits, ...) live beside their functions, in the schema the app's drop-in
    // extension was created in (often public); for the extension's own functions it is ratelimit.
    Oid schema_oid = get_func_namespace(function_oid);
    if (plan_ == nullptr || schema_oid != schema_oid_) {
        char* schema_name = get_namespace_name(schema_oid);
        if (schema_name == nullptr) {
            elog(ERROR, "ratelimit: schema %u of function %u not found", schema_oid, function_oid);
        }
        char* sql = psprintf(sql_template_, quote_identifier(schema_name));
        SPIPlanPtr plan = SPI_prepare(sql, nargs_, const_cast<Oid*>(argtypes_));
        if (plan == nullptr) {
            elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
        }
        if (SPI_keepplan(plan) != 0) {
            elog(ERROR, "ratelimit: SPI_keepplan failed");
        }
        if (plan_ != nullptr) {
            SPI_freeplan(plan_);
        }
        plan_ = plan;
        schema_oid_ = schema_oid;
    }
    function_oid_ = function_oid;
    return plan_;
}

}  // namespace ratelimit::pg
