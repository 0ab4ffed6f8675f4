#include "pg/bridge/guard.hpp"

#include <cstdio>
#include <new>

#include "ratelimit/error.hpp"

namespace ratelimit::pg {

namespace {

void record_core(PendingError* pending, int sqlstate, const char* message) noexcept {
    pending->kind = PendingError::Kind::kCore;
    pending->sqlstate = sqlstate;
    snprintf(pending->message, sizeof pending->message, "%s", message);
}

}  // namespace

void capture_current_exception(PendingError* pending) noexcept {
    try {
        throw;
    } catch (const PostgresError& e) {
        pending->kind = PendingError::Kind::kPostgres;
        pending->postgres = e.data();
    } catch (const ArgumentError& e) {
        int sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
        if (e.kind() == ErrorKind::kNullArgument)
            sqlstate = ERRCODE_NULL_VALUE_NOT_ALLOWED;
        if (e.kind() == ErrorKind::kNotAllowed)
            sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
        record_core(pending, sqlstate, e.what());
    } catch (const std::bad_alloc&) {
        record_core(pending, ERRCODE_OUT_OF_MEMORY, "ratelimit: out of memory");
    } catch (const std::exception& e) {
        record_core(pending, ERRCODE_INTERNAL_ERROR, e.what());
    } catch (...) {
        record_core(pending, ERRCODE_INTERNAL_ERROR, "ratelimit: unknown internal error");
    }
}

void raise_pending(const PendingError& pending) {
    if (pending.kind == PendingError::Kind::kPostgres) {
        ReThrowError(pending.postgres);
    }
    ereport(ERROR, (errcode(pending.sqlstate), errmsg("%s", pending.message)));
    pg_unreachable();
}

}  // namespace ratelimit::pg
