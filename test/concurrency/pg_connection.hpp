// A tiny RAII layer over libpq for the concurrency tests. Every PGconn and PGresult is freed on
// every path, including the early returns of GoogleTest's ASSERT_* macros and exceptions.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ratelimit_test {

class PgResult {
  public:
    explicit PgResult(PGresult* result) : result_(result) {}

    ExecStatusType status() const { return PQresultStatus(result_.get()); }
    bool ok() const { return status() == PGRES_TUPLES_OK || status() == PGRES_COMMAND_OK; }

    // "" when the server sent no SQLSTATE (success, or a client-side failure).
    std::string sqlstate() const { return field(PG_DIAG_SQLSTATE); }
    std::string error_message() const { return PQresultErrorMessage(result_.get()); }

    int rows() const { return PQntuples(result_.get()); }
    int columns() const { return PQnfields(result_.get()); }
    bool is_null(int row, int column) const { return PQgetisnull(result_.get(), row, column); }
    std::string value(int row, int column) const { return PQgetvalue(result_.get(), row, column); }

    // The one value of a one-row, one-column result; throws for any other shape, so a worker
    // thread's surprise shows up as a recorded failure instead of a silently wrong count.
    std::string single_value() const {
        if (!ok() || rows() != 1 || columns() != 1 || is_null(0, 0)) {
            throw std::runtime_error("expected one non-NULL value, got " + describe());
        }
        return value(0, 0);
    }

    bool single_bool() const {
        std::string text = single_value();
        if (text != "t" && text != "f") {
            throw std::runtime_error("expected a boolean, got '" + text + "'");
        }
        return text == "t";
    }

    std::string describe() const {
        std::string text = PQresStatus(status());
        if (!ok()) {
            text += " [" + sqlstate() + "] " + error_message();
        } else {
            text += ", " + std::to_string(rows()) + " row(s) x " + std::to_string(columns()) +
                    " column(s)";
        }
        return text;
    }

  private:
    std::string field(int code) const {
        const char* text = PQresultErrorField(result_.get(), code);
        return text ? text : "";
    }

    struct Clear {
        void operator()(PGresult* result) const { PQclear(result); }
    };
    std::unique_ptr<PGresult, Clear> result_;
};

// One connection, opened with libpq's defaults, i.e. the PG* environment that test/run.sh sets.
class PgConnection {
  public:
    PgConnection() : PgConnection(std::string()) {}
    // `options`: libpq connection options added to the environment's (PG*), e.g. "dbname=x".
    explicit PgConnection(const std::string& options)
        : conn_(PQconnectdb(("application_name=ratelimit_concurrency_tests " + options).c_str())) {
        // The tests assert on results, not on NOTICEs (DROP ... IF EXISTS sends some); keep
        // them out of GoogleTest's output.
        if (conn_) {
            PQsetNoticeProcessor(
                conn_.get(), [](void*, const char*) {}, nullptr);
        }
    }

    bool connected() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }
    std::string error_message() const {
        return conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
    }
    int backend_pid() const { return PQbackendPID(conn_.get()); }
    PGTransactionStatusType transaction_status() const { return PQtransactionStatus(conn_.get()); }

    // Whatever the server answered, errors included.
    PgResult exec(const std::string& sql) { return PgResult(PQexec(conn_.get(), sql.c_str())); }

    // Parameters travel separately from the SQL text (text format; nullptr is SQL NULL).
    PgResult exec_params(const std::string& sql, const std::vector<const char*>& params) {
        return PgResult(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()),
                                     nullptr, params.data(), nullptr, nullptr, 0));
    }

    // As exec / exec_params, but an error is an exception naming the statement.
    PgResult query(const std::string& sql) { return checked(sql, exec(sql)); }
    PgResult query_params(const std::string& sql, const std::vector<const char*>& params) {
        return checked(sql, exec_params(sql, params));
    }

  private:
    static PgResult checked(const std::string& sql, PgResult result) {
        if (!result.ok()) {
            throw std::runtime_error(sql + ": " + result.describe());
        }
        return result;
    }

    struct Finish {
        void operator()(PGconn* conn) const { PQfinish(conn); }
    };
    std::unique_ptr<PGconn, Finish> conn_;
};

}  // namespace ratelimit_test
