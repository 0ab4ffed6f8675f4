// The error bridge between C++ and PostgreSQL. The rule, for every file under src/pg/:
//
//  1. Every SQL-callable function is declared with RATELIMIT_SQL_FUNCTION, which runs its body
//     through run_guarded(). No C++ exception ever leaves run_guarded(): it is caught, what is
//     needed to report it is copied into plain memory, the catch block ends (destroying the
//     exception), and only then is the PostgreSQL ERROR raised.
//
//  2. Every call from C++ into PostgreSQL code that may ereport(ERROR) runs inside
//     call_postgres(). Its callable must not create C++ objects with destructors and must not
//     throw: a longjmp may leave it at any point. An ERROR caught there becomes a PostgresError
//     exception, which unwinds the C++ stack normally up to run_guarded(), where the original
//     error (SQLSTATE, message, detail) is raised again.
//
//  3. A PostgresError is never swallowed: the transaction it happened in must abort, because
//     only abort releases what the failed PostgreSQL code held (locks, buffer pins, SPI).
//
// Logging from C++ goes through call_postgres() too, and never above WARNING.
#pragma once

#include <exception>

#include "pg/bridge/postgres.hpp"

namespace ratelimit::pg {

// A PostgreSQL ERROR carried through C++ frames; `data` lives in the caller's memory context.
class PostgresError : public std::exception {
  public:
    explicit PostgresError(ErrorData* data) : data_(data) {}
    ErrorData* data() const noexcept { return data_; }
    const char* what() const noexcept override {
        return data_->message ? data_->message : "PostgreSQL error";
    }

  private:
    ErrorData* data_;
};

// What run_guarded() raises once no C++ object is alive any more.
struct PendingError {
    enum class Kind { kNone, kCore, kPostgres } kind = Kind::kNone;
    int sqlstate = 0;
    ErrorData* postgres = nullptr;
    // Written when a core error is captured and read only then: left unset, so that a call
    // that succeeds does not clear a kilobyte first.
    char message[1024];
};

// Called from inside a catch (...) block: records the in-flight exception into `pending`.
void capture_current_exception(PendingError* pending) noexcept;

// Raises `pending` as a PostgreSQL ERROR; never returns.
[[noreturn]] void raise_pending(const PendingError& pending);

using SqlBody = Datum (*)(FunctionCallInfo);

// The entry guard: runs `body`, turning any C++ exception into a PostgreSQL ERROR.
inline Datum run_guarded(FunctionCallInfo fcinfo, SqlBody body) {
    PendingError pending;
    Datum result = 0;
    try {
        result = body(fcinfo);
    } catch (...) {
        capture_current_exception(&pending);
    }
    if (pending.kind != PendingError::Kind::kNone) {
        raise_pending(pending);
    }
    return result;
}

// The opposite guard: runs PostgreSQL code, turning its ERROR into a PostgresError.
template <typename Fn>
void call_postgres(Fn&& fn) {
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* volatile caught = nullptr;
    PG_TRY();
    { fn(); }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_context);
        caught = CopyErrorData();
        FlushErrorState();
    }
    PG_END_TRY();
    if (caught != nullptr) {
        throw PostgresError(caught);
    }
}

}  // namespace ratelimit::pg

// Declares the SQL-callable C symbol `sql_name` whose work is done by the C++ function `body`.
#define RATELIMIT_SQL_FUNCTION(sql_name, body)           \
    extern "C" {                                         \
    PG_FUNCTION_INFO_V1(sql_name);                       \
    Datum sql_name(PG_FUNCTION_ARGS) {                   \
        return ratelimit::pg::run_guarded(fcinfo, body); \
    }                                                    \
    }
