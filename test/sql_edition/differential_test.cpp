// The SQL edition decides exactly as the C edition: random calls of the native API, of the
// policy API (with writes to the policy tables) and of the three apps' drop-ins, each made alike
// in a database with the C edition (extension ratelimit) and in one with the SQL edition
// (ratelimit_sql), on the same frozen clock (ratelimit.test_clock). Both must give the same answer
// (the same result text, or the same SQLSTATE and primary message) and leave the same state rows
// for the keys the call named (for a policy call: its policies' namespaces and their newest
// denial log rows; for a drop-in: the app's rows of the call's keys); the whole state tables, the
// apps' tables and the denial log are compared every few thousand calls and at the end.
// test/sql_edition/differential.sh makes the databases and runs it:
//
//   differential_test C_EDITION_CONNINFO SQL_EDITION_CONNINFO [APP C_CONNINFO SQL_CONNINFO]...
//
// The first pair has the editions alone, for the native and policy calls. A database gets only
// one app's drop-ins (rpc_limits' and sliding_window_limits' check_rate_limit share a name), so
// each APP (rpc_limits, endpoint_limits, sliding_window_limits) has a pair of its own: the C
// edition with ratelimit_<APP>, the SQL edition with ratelimit_sql_<APP>. An app not given is
// not called. A drop-in call is made in the session PostgREST would leave: the request's JWT
// (request.jwt.claims, request.jwt.claim.sub), the drop-ins' superuser settings
// (ratelimit.dropin_engine, dropin_require_policy, dropin_caller_limits, jwt_roles), the
// transactions' isolation and read-only default, and the API role it runs as (SET ROLE anon,
// authenticated or service_role, or none).
//
// DIFFERENTIAL_STEPS calls are made (100000 by default). Each run prints its seed, and the calls
// depend on the seed alone (never on an answer), so DIFFERENTIAL_SEED replays a run exactly.
//
// The calls come from one table of generators with weights (kGenerators): an area of the API
// joins the test as one more generator function there. A generator may also start a scenario,
// calls queued to run in order on a fresh key with the clock moved exactly (window edges, delay
// queues, daylight saving at midnight). Every call goes through run_step, which runs it on both
// editions of its pair and compares.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ratelimit_test {
namespace {

using Micros = std::int64_t;
// A parameter or a column: std::nullopt is SQL NULL.
using Value = std::optional<std::string>;
using Row = std::vector<Value>;

constexpr Micros kMillisecond = 1000;
constexpr Micros kSecond = 1000 * kMillisecond;
constexpr Micros kMinute = 60 * kSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;
constexpr Micros kMaxWindow = 365 * kDay;
constexpr std::int64_t kMaxInteger = 2147483647;

// The run's clock moves between 2026-01-01 and 2031-01-01 UTC.
constexpr Micros kClockStart = 1767225600LL * kSecond;
constexpr Micros kClockEnd = 1924992000LL * kSecond;

// The share of calls given a bad argument (or two) that both editions must refuse alike.
constexpr double kBadInputs = 0.06;
// The share of calls on the memory engine, which the SQL edition does not have.
constexpr double kMemory = 0.02;
// The whole state tables are compared this often, so that a write to a key the call did not
// name shows up too.
constexpr long kWholeStateEvery = 5000;

// ---- random numbers: xoshiro256**, the same sequence for a seed on every platform ----------

class Random {
  public:
    explicit Random(std::uint64_t seed) {
        for (std::uint64_t& word : state_) {
            seed += 0x9e3779b97f4a7c15ULL;
            std::uint64_t mixed = seed;
            mixed = (mixed ^ (mixed >> 30)) * 0xbf58476d1ce4e5b9ULL;
            mixed = (mixed ^ (mixed >> 27)) * 0x94d049bb133111ebULL;
            word = mixed ^ (mixed >> 31);
        }
    }

    std::uint64_t next() {
        const std::uint64_t result = rotate(state_[1] * 5, 7) * 9;
        const std::uint64_t shifted = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= shifted;
        state_[3] = rotate(state_[3], 45);
        return result;
    }

    // In [0, 1).
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    bool chance(double probability) { return unit() < probability; }

    // In [low, high].
    std::int64_t between(std::int64_t low, std::int64_t high) {
        const std::uint64_t span = static_cast<std::uint64_t>(high - low) + 1;
        return low + static_cast<std::int64_t>(next() % span);
    }

    template <typename T>
    const T& pick(const std::vector<T>& items) {
        return items[next() % items.size()];
    }

    template <typename T>
    void shuffle(std::vector<T>& items) {
        for (std::size_t i = items.size(); i > 1; --i)
            std::swap(items[i - 1], items[next() % i]);
    }

  private:
    static std::uint64_t rotate(std::uint64_t value, int bits) {
        return (value << bits) | (value >> (64 - bits));
    }
    std::uint64_t state_[4];
};

// ---- text ---------------------------------------------------------------------------------

// An instant as ratelimit.test_clock takes it: "2026-01-01 00:00:00.000000+00".
std::string clock_text(Micros instant) {
    Micros seconds = instant / kSecond;
    Micros fraction = instant % kSecond;
    if (fraction < 0) {
        fraction += kSecond;
        --seconds;
    }
    Micros days = seconds / 86400;
    Micros second_of_day = seconds % 86400;
    if (second_of_day < 0) {
        second_of_day += 86400;
        --days;
    }
    // The civil date of a day count (Howard Hinnant's civil_from_days).
    days += 719468;
    const Micros era = (days >= 0 ? days : days - 146096) / 146097;
    const Micros day_of_era = days - era * 146097;
    const Micros year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    const Micros day_of_year =
        day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    const Micros shifted_month = (5 * day_of_year + 2) / 153;
    const Micros day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    const Micros month = shifted_month < 10 ? shifted_month + 3 : shifted_month - 9;
    const Micros year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
    char text[64];
    std::snprintf(text, sizeof text, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld.%06lld+00",
                  static_cast<long long>(year), static_cast<long long>(month),
                  static_cast<long long>(day), static_cast<long long>(second_of_day / 3600),
                  static_cast<long long>(second_of_day / 60 % 60),
                  static_cast<long long>(second_of_day % 60), static_cast<long long>(fraction));
    return text;
}

// An array literal; every element quoted, so that any key survives.
std::string array_text(const std::vector<Value>& elements) {
    std::string text = "{";
    for (std::size_t i = 0; i < elements.size(); ++i) {
        if (i > 0)
            text += ',';
        if (!elements[i]) {
            text += "NULL";
            continue;
        }
        text += '"';
        for (const char c : *elements[i]) {
            if (c == '"' || c == '\\')
                text += '\\';
            text += c;
        }
        text += '"';
    }
    return text + "}";
}

std::string repeated(const std::string& piece, int times) {
    std::string text;
    for (int i = 0; i < times; ++i)
        text += piece;
    return text;
}

// A value as an SQL literal, shortened past `most` bytes (then it is for reading only).
std::string literal(const Value& value, std::size_t most = 300) {
    if (!value)
        return "NULL";
    std::string text = "'";
    const std::string& raw = *value;
    for (std::size_t i = 0; i < raw.size() && i < most; ++i) {
        if (raw[i] == '\'')
            text += '\'';
        text += raw[i];
    }
    text += '\'';
    if (raw.size() > most)
        text += "/* shortened: " + std::to_string(raw.size()) + " bytes */";
    return text;
}

// ---- the two databases --------------------------------------------------------------------

// What one statement gave: its rows, or its error.
struct Outcome {
    bool error = false;
    std::string sqlstate;
    std::string message;  // the primary message, compared whole
    std::string details;  // DETAIL, HINT and CONTEXT: shown, not compared
    std::vector<std::string> columns;
    std::vector<Row> rows;

    bool same(const Outcome& other) const {
        if (error != other.error)
            return false;
        return error ? sqlstate == other.sqlstate && message == other.message : rows == other.rows;
    }

    std::string text(const std::string& indent = "") const {
        if (error)
            return "ERROR " + sqlstate + ": " + message;
        std::string text;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (i > 0)
                text += "\n" + indent;
            for (std::size_t j = 0; j < rows[i].size(); ++j)
                text += (j > 0 ? " | " : "") + rows[i][j].value_or("NULL");
        }
        return rows.empty() ? "(no rows)" : text;
    }
};

// One connection in pipeline mode: statements are sent without waiting, each with a sync of its
// own (so each runs in a transaction of its own and an error undoes only its statement), and
// their outcomes read later in the same order.
class Database {
  public:
    Database(std::string label, const std::string& conninfo)
        : label_(std::move(label)), conn_(PQconnectdb(conninfo.c_str())) {
        if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK)
            throw std::runtime_error(label_ + ": cannot connect (" + conninfo +
                                     "): " + (conn_ ? PQerrorMessage(conn_) : "out of memory"));
        PQsetNoticeProcessor(
            conn_, [](void*, const char*) {}, nullptr);
        if (PQenterPipelineMode(conn_) != 1)
            throw std::runtime_error(label_ + ": no pipeline mode: " + PQerrorMessage(conn_));
    }
    ~Database() { PQfinish(conn_); }
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    const std::string& label() const { return label_; }

    // Sends one statement and a sync. A text sent a second time is prepared (up to
    // kMostPrepared of them), so that the server parses and plans it once per connection: the
    // state query runs at every step.
    void send(const std::string& sql, const std::vector<Value>& params) {
        std::vector<const char*> values;
        values.reserve(params.size());
        for (const Value& value : params)
            values.push_back(value ? value->c_str() : nullptr);
        const int count = static_cast<int>(values.size());
        auto prepared = prepared_.find(sql);
        bool preparing = false;
        if (prepared == prepared_.end() && prepared_.size() < kMostPrepared && ++seen_[sql] >= 2) {
            const std::string name = "statement_" + std::to_string(++names_);
            preparing = true;
            if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), count, nullptr) != 1 ||
                PQpipelineSync(conn_) != 1)
                throw std::runtime_error(label_ + ": cannot send: " + PQerrorMessage(conn_));
            prepared = prepared_.emplace(sql, name).first;
        }
        const int sent = prepared == prepared_.end()
                             ? PQsendQueryParams(conn_, sql.c_str(), count, nullptr, values.data(),
                                                 nullptr, nullptr, 0)
                             : PQsendQueryPrepared(conn_, prepared->second.c_str(), count,
                                                   values.data(), nullptr, nullptr, 0);
        if (sent != 1 || PQpipelineSync(conn_) != 1)
            throw std::runtime_error(label_ + ": cannot send: " + PQerrorMessage(conn_));
        sent_.push_back(Sent{sql, preparing});
    }

    // The outcome of the oldest statement sent and not read yet. When its text was prepared
    // and that failed, the outcome is the failure (running it says only that it does not exist).
    Outcome receive() {
        const Sent sent = sent_.front();
        sent_.pop_front();
        if (sent.preparing) {
            const Outcome prepared = receive_one();
            if (prepared.error) {
                receive_one();
                prepared_.erase(sent.sql);
                return prepared;
            }
        }
        return receive_one();
    }

    Outcome run(const std::string& sql, const std::vector<Value>& params = {}) {
        send(sql, params);
        return receive();
    }

    // For setting up: an error stops the run.
    Outcome checked(const std::string& sql, const std::vector<Value>& params = {}) {
        Outcome outcome = run(sql, params);
        if (outcome.error)
            throw std::runtime_error(label_ + ": " + sql + ": " + outcome.text() + " " +
                                     outcome.details);
        return outcome;
    }

  private:
    static constexpr std::size_t kMostPrepared = 2000;

    struct Sent {
        std::string sql;
        bool preparing = false;  // prepared first, the outcome of that read first
    };

    Outcome receive_one() {
        Outcome outcome;
        bool answered = false;
        while (PGresult* result = PQgetResult(conn_)) {
            if (!answered)
                outcome = read(result);
            answered = true;
            PQclear(result);
        }
        PGresult* sync = PQgetResult(conn_);
        const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
        PQclear(sync);
        if (!answered || !synced)
            throw std::runtime_error(label_ +
                                     ": the connection was lost: " + PQerrorMessage(conn_));
        return outcome;
    }

    static std::string field(const PGresult* result, int code) {
        const char* text = PQresultErrorField(result, code);
        return text ? text : "";
    }

    static Outcome read(const PGresult* result) {
        Outcome outcome;
        const ExecStatusType status = PQresultStatus(result);
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
            for (int column = 0; column < PQnfields(result); ++column)
                outcome.columns.push_back(PQfname(result, column));
            for (int row = 0; row < PQntuples(result); ++row) {
                Row values;
                for (int column = 0; column < PQnfields(result); ++column)
                    values.push_back(PQgetisnull(result, row, column)
                                         ? Value()
                                         : Value(PQgetvalue(result, row, column)));
                outcome.rows.push_back(std::move(values));
            }
            return outcome;
        }
        outcome.error = true;
        outcome.sqlstate = field(result, PG_DIAG_SQLSTATE);
        outcome.message = field(result, PG_DIAG_MESSAGE_PRIMARY);
        if (outcome.message.empty())
            outcome.message =
                std::string(PQresStatus(status)) + ": " + PQresultErrorMessage(result);
        for (const auto& [code, name] :
             {std::pair<int, const char*>{PG_DIAG_MESSAGE_DETAIL, "DETAIL"},
              {PG_DIAG_MESSAGE_HINT, "HINT"},
              {PG_DIAG_CONTEXT, "CONTEXT"}}) {
            const std::string text = field(result, code);
            if (!text.empty())
                outcome.details +=
                    std::string(outcome.details.empty() ? "" : "; ") + name + ": " + text;
        }
        return outcome;
    }

    std::string label_;
    PGconn* conn_;
    std::deque<Sent> sent_;
    std::map<std::string, int> seen_;
    std::map<std::string, std::string> prepared_;
    long names_ = 0;
};

// ---- a call -------------------------------------------------------------------------------

struct Call {
    std::string function;  // the function called: the counts are kept by it
    std::string sql;
    std::vector<Value> params;
    std::string policy;  // the keys' namespace in the state tables ('': native keys)
    // A call by policy (or a write to the policy tables): the state rows of these policies'
    // namespaces and their newest denial log rows are compared instead of the keys'.
    std::vector<std::string> policies;
    std::vector<std::string> keys;  // whose state rows are compared after the call
    bool memory = false;            // on the memory engine: the SQL edition refuses it (0A000)
    // A drop-in call: the app whose databases it is made in ("": the editions alone), the
    // session settings it is made with (set before it when they differ from the step before's),
    // the role it is made as (SET ROLE before it and RESET after, "": the connection's own), and
    // the query of the state rows compared after it, with its parameters.
    std::string app;
    std::vector<std::pair<std::string, std::string>> settings;
    std::string role;
    std::string state_sql;
    std::vector<Value> state_params;
    Micros period = 0;  // the clock may move by exactly this before the call
    std::string clock;  // a clock of the call's own ("": the run's)
    // How the run's clock moves before the call: at random (Context::move_clock), or, in a
    // scenario, to the instant `at`, or to the next multiple of `align` (when not 0) and then
    // by exactly `move`.
    std::optional<Micros> at;
    std::optional<Micros> move;
    Micros align = 0;
};

// One argument of a call: its name and type, its value, and the default the function declares.
struct Argument {
    std::string name;
    std::string type;
    Value value;
    bool has_default = false;
    Value fallback;
};

Argument required(const std::string& name, const std::string& type, Value value) {
    return Argument{name, type, std::move(value), false, std::nullopt};
}

Argument defaulted(const std::string& name, const std::string& type, Value value, Value fallback) {
    return Argument{name, type, std::move(value), true, std::move(fallback)};
}

// Writes the call of ratelimit.<call.function> (or of `head` followed by the function's name),
// the values as parameters: positional, or (one call in four) by name in a shuffled order. An
// argument at its default is sometimes left out, so that the editions' defaults are compared too.
void write_call(Random& random, Call& call, const std::vector<Argument>& arguments,
                const std::string& head = "SELECT ratelimit.") {
    const auto omissible = [](const Argument& argument) {
        return argument.has_default && argument.value == argument.fallback;
    };
    std::vector<const Argument*> given;
    const bool named = random.chance(0.25);
    if (named) {
        for (const Argument& argument : arguments) {
            if (!omissible(argument) || random.chance(0.5))
                given.push_back(&argument);
        }
        random.shuffle(given);
    } else {
        std::size_t needed = 0;
        for (std::size_t i = 0; i < arguments.size(); ++i) {
            if (!omissible(arguments[i]))
                needed = i + 1;
        }
        const auto count = static_cast<std::size_t>(random.between(
            static_cast<std::int64_t>(needed), static_cast<std::int64_t>(arguments.size())));
        for (std::size_t i = 0; i < count; ++i)
            given.push_back(&arguments[i]);
    }
    call.sql = head + call.function + "(";
    for (std::size_t i = 0; i < given.size(); ++i) {
        if (i > 0)
            call.sql += ", ";
        if (named)
            call.sql += given[i]->name + " => ";
        call.params.push_back(given[i]->value);
        call.sql += "$" + std::to_string(call.params.size()) + "::" + given[i]->type;
    }
    call.sql += ")";
}

// The call's text with its parameters in place, for reading and for running by hand.
std::string inline_sql(const Call& call, std::size_t most = 300) {
    std::string text;
    for (std::size_t i = 0; i < call.sql.size(); ++i) {
        if (call.sql[i] != '$' || i + 1 >= call.sql.size() || !std::isdigit(call.sql[i + 1])) {
            text += call.sql[i];
            continue;
        }
        std::size_t end = i + 1;
        while (end < call.sql.size() && std::isdigit(call.sql[end]))
            ++end;
        const std::size_t number = std::stoul(call.sql.substr(i + 1, end - i - 1));
        text += literal(call.params.at(number - 1), most);
        i = end - 1;
    }
    return text;
}

// ---- what the calls are made of -----------------------------------------------------------

struct Period {
    std::string text;
    Micros length = 0;  // 0 for a calendar period, whose length varies
    bool calendar = false;
};

// A limit as a key is called with: what the calls on one key share until it changes.
struct Profile {
    std::string algorithm;
    std::int64_t limit = 1;
    Period period;
    std::optional<std::int64_t> burst;
    Value zone;
};

const std::vector<std::string> kAlgorithms = {"fixed_window",   "rolling_window",
                                              "sliding_window", "sliding_window_counter",
                                              "token_bucket",   "gcra"};

bool is_bucket(const std::string& algorithm) {
    return algorithm == "token_bucket" || algorithm == "gcra";
}

// From 1 ms to 365 days, written as users write them; the short ones come up more often, so
// that limits bite while the clock moves by milliseconds.
const std::vector<Period> kPeriods = {
    {"1 millisecond", kMillisecond},
    {"00:00:00.003", 3 * kMillisecond},
    {"10 milliseconds", 10 * kMillisecond},
    {"50 ms", 50 * kMillisecond},
    {"100 milliseconds", 100 * kMillisecond},
    {"0.25 seconds", 250 * kMillisecond},
    {"1 second", kSecond},
    {"1 second", kSecond},
    {"1.7 seconds", 1700 * kMillisecond},
    {"2 seconds", 2 * kSecond},
    {"00:00:05", 5 * kSecond},
    {"1 minute", kMinute},
    {"1 hour", kHour},
    {"1 day", kDay},
    {"1 day 00:00:00.5", kDay + 500 * kMillisecond},
    {"7 days", 7 * kDay},
    {"30 days", 30 * kDay},
    {"364 days 23:59:59.999999", kMaxWindow - 1},
    {"365 days", kMaxWindow},
    {"8760 hours", kMaxWindow},
};

// Calendar periods (fixed_window only): a day or a week needs p_time_zone; a month does not.
const std::vector<Period> kZonedCalendarPeriods = {
    {"1 day", 0, true}, {"1 week", 0, true},  {"7 days", 0, true},
    {"1 mon", 0, true}, {"1 month", 0, true},
};
const std::vector<Period> kMonthPeriods = {{"1 mon", 0, true}, {"1 month", 0, true}};

// Zones whose midnights and daylight saving differ in every way a calendar window can meet:
// half and quarter hours, a half-hour shift (Lord_Howe), a negative one (Dublin), midnights
// that do not exist (Santiago, Havana), and the spellings pg_tzset takes besides full names.
const std::vector<std::string> kZones = {
    "Europe/Berlin",
    "America/New_York",
    "UTC",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/St_Johns",
    "America/Santiago",
    "America/Havana",
    "Europe/Dublin",
    "Africa/Casablanca",
    "Etc/GMT-14",
    "europe/berlin",
    "utc",
    "CET",
    "EST",
    "EST5EDT",
    "GMT0",
    "UTC+3",
    "+05:30",
};

// The zones whose local midnights the clock jumps to (the days, weeks and months of calendar
// windows begin there).
const std::vector<std::string> kMidnightZones = {"UTC",
                                                 "Europe/Berlin",
                                                 "America/New_York",
                                                 "Asia/Kolkata",
                                                 "Australia/Lord_Howe",
                                                 "Pacific/Chatham",
                                                 "America/Santiago",
                                                 "America/Havana",
                                                 "Europe/Dublin",
                                                 "Africa/Casablanca",
                                                 "Asia/Kathmandu",
                                                 "CET",
                                                 "UTC+3"};

const std::vector<std::string> kMaxWaits = {
    "1 millisecond", "00:00:00.0005", "10 milliseconds", "250 milliseconds",
    "1 second",      "5 seconds",     "1 minute",        "1 hour",
    "1 day",         "365 days",
};

const std::vector<std::string> kBlockDurations = {
    "00:00:00.0005", "1 millisecond", "20 milliseconds", "250 milliseconds", "1 second",
    "3 seconds",     "1 second",      "1 minute",        "1 hour",           "365 days",
};

// Values an argument must refuse (both editions alike), by the argument's name.
const std::vector<Value>& bad_values(const std::string& argument) {
    static const std::map<std::string, std::vector<Value>> kBad = {
        {"p_key", {std::nullopt, "", std::string(257, 'k'), repeated("\u00e9", 129)}},
        {"p_limit", {std::nullopt, "0", "-5", "-2147483648"}},
        {"p_period",
         {std::nullopt, "0", "-1 second", "00:00:00.000999", "365 days 00:00:00.000001", "366 days",
          "8761 hours", "1 year", "1 mon 1 day", "2 mons", "-1 mon", "2 days", "24 hours",
          "-365 days", "1 week 1 day"}},
        {"p_cost", {std::nullopt, "-1", "-2147483648"}},
        {"p_algorithm",
         {std::nullopt, "", "Fixed_Window", "leaky_bucket", "token bucket", "gcra ",
          std::string(100, 'x'), repeated("\u00e9", 40)}},
        {"p_engine", {std::nullopt, "", "Table", "disk", "memory ", "unlogged\n"}},
        {"p_burst", {"0", "-1", "2147483647", "5"}},
        {"p_time_zone",
         {"PST", "CEST", "Mars/Olympus", "", "Europe/Berlin ", "Z", std::string(300, 'x')}},
        {"p_max_wait",
         {"-1 second", "366 days", "1 mon", "365 days 00:00:00.000001", "-00:00:00.000001",
          "1 second"}},
        {"p_duration",
         {std::nullopt, "0", "-1 second", "1 mon", "366 days", "365 days 00:00:00.000001"}},
    };
    static const std::vector<Value> kNone;
    const auto found = kBad.find(argument);
    return found == kBad.end() ? kNone : found->second;
}

// One bad argument, now and then two (which of them an edition names first must agree).
void give_bad_arguments(Random& random, std::vector<Argument>& arguments) {
    const auto find = [&](const std::string& name) -> Argument* {
        for (Argument& argument : arguments) {
            if (argument.name == name)
                return &argument;
        }
        return nullptr;
    };
    const int count = random.chance(0.8) ? 1 : 2;
    for (int i = 0; i < count; ++i) {
        Argument& argument = arguments[random.next() % arguments.size()];
        const std::vector<Value>& values = bad_values(argument.name);
        if (values.empty())
            continue;
        argument.value = random.pick(values);
        // A zone is read only for a calendar period: mostly give it one, so that the zone is
        // what is wrong.
        if (argument.name == "p_time_zone" && random.chance(0.7)) {
            find("p_period")->value = random.chance(0.5) ? "1 day" : "1 mon";
            find("p_algorithm")->value = "fixed_window";
        }
    }
}

std::int64_t random_limit(Random& random) {
    const double dice = random.unit();
    if (dice < 0.40)
        return random.between(1, 6);
    if (dice < 0.65)
        return random.between(7, 100);
    if (dice < 0.80)
        return random.between(101, 100000);
    if (dice < 0.90)
        return random.between(kMaxInteger - 2, kMaxInteger);
    return random.between(1, kMaxInteger);
}

// The largest burst a limit takes: refilling it (burst * period / limit) takes at most 365 days.
std::int64_t most_burst(std::int64_t limit, Micros period) {
    const __int128 most =
        period == 0 ? kMaxInteger : static_cast<__int128>(limit) * kMaxWindow / period;
    return static_cast<std::int64_t>(std::clamp<__int128>(most, 1, kMaxInteger));
}

std::int64_t random_burst(Random& random, std::int64_t limit, Micros period) {
    const std::int64_t most = most_burst(limit, period);
    const double dice = random.unit();
    std::int64_t burst = 0;
    if (dice < 0.5)
        burst = random.between(1, 10);
    else if (dice < 0.75)
        burst = limit + random.between(-2, 2);
    else
        burst = random.between(1, most);
    return std::clamp<std::int64_t>(burst, 1, most);
}

Profile random_profile(Random& random, const std::string& algorithm) {
    Profile profile;
    profile.algorithm = algorithm;
    if (algorithm == "fixed_window" && random.chance(0.2)) {
        if (random.chance(0.25)) {
            profile.period = random.pick(kMonthPeriods);
        } else {
            profile.period = random.pick(kZonedCalendarPeriods);
            profile.zone = random.pick(kZones);
        }
        profile.limit = random.chance(0.7) ? random.between(1, 10) : random_limit(random);
        return profile;
    }
    profile.period = random.pick(kPeriods);
    profile.limit = random_limit(random);
    if (is_bucket(algorithm) && random.chance(0.5))
        profile.burst = random_burst(random, profile.limit, profile.period.length);
    return profile;
}

// The cost of a call: mostly 1, sometimes 0, all of the allowance, one more, or far beyond.
std::int64_t random_cost(Random& random, const Profile& profile) {
    const std::int64_t most = profile.burst.value_or(profile.limit);
    const double dice = random.unit();
    if (dice < 0.10)
        return 0;
    if (dice < 0.62)
        return 1;
    if (dice < 0.75)
        return random.between(2, 4);
    if (dice < 0.87)
        return random.between(0, most);
    if (dice < 0.93)
        return most;
    if (dice < 0.96)
        return std::min(most + 1, kMaxInteger);
    if (dice < 0.98)
        return kMaxInteger;
    return random.between(0, kMaxInteger);
}

std::string random_engine(Random& random) {
    return random.chance(0.5) ? "table" : "unlogged";
}

Value number(std::int64_t value) {
    return std::to_string(value);
}

Value optional_number(const std::optional<std::int64_t>& value) {
    return value ? number(*value) : std::nullopt;
}

// ---- the run's state: keys and the clock --------------------------------------------------

// The local midnights of kMidnightZones from 2026 to 2030, as the server's zone data has them:
// where calendar windows turn.
struct Midnights {
    std::vector<Micros> all;
    // By zone, those that begin or end a day of other than 24 hours (daylight saving), where a
    // midnight may come twice or not at all.
    std::map<std::string, std::vector<Micros>> turning;
};

// A key of the small pool that state builds up on, and the limit it is called with.
struct PoolKey {
    std::string key;
    std::string home;  // the algorithm it is called with most of the time
    // Called with its home algorithm only, its limit seldom changed, often a large limit over a
    // long period: state that only long runs build (a sliding window's log past 64 entries).
    bool steady = false;
    Profile profile;
};

const std::vector<Period> kLongPeriods = {{"1 hour", kHour},
                                          {"1 day", kDay},
                                          {"7 days", 7 * kDay},
                                          {"30 days", 30 * kDay},
                                          {"365 days", kMaxWindow}};

Profile steady_profile(Random& random, const std::string& algorithm) {
    Profile profile = random_profile(random, algorithm);
    if (profile.period.calendar)
        return profile;
    if (random.chance(0.5))
        profile.period = random.pick(kLongPeriods);
    if (random.chance(0.5))
        profile.limit = random.between(65, 1000);
    if (profile.burst)
        profile.burst = random_burst(random, profile.limit, profile.period.length);
    return profile;
}

// A request's JWT as PostgREST leaves it in the session, and the caller the drop-ins take from
// it.
struct Jwt {
    std::string claims;     // request.jwt.claims ("": none)
    std::string claim_sub;  // request.jwt.claim.sub, which wins when set ("": none)
    std::string user;       // the caller's user id, as the app's tables write it ("": none)
    // No caller and no error: check_rate_limit allows without counting (the apps' fail-open).
    bool anonymous = true;
};

// The drop-ins' settings in an app's sessions: the request's JWT, and the superuser settings,
// which last for many calls as a server's configuration does.
struct DropInSession {
    Jwt jwt;
    std::string engine = "table";
    std::string require_policy = "off";
    std::string caller_limits = "ignore";
    std::string jwt_roles = "anon,authenticated";
    // The transactions the calls run in: the sliding window's buckets need READ COMMITTED, and
    // every drop-in writes.
    std::string isolation = "read committed";
    std::string read_only = "off";
};

// A drop-in's policy (rpc.<name>, endpoint.<name>) as the test last wrote it: its limit, and its
// period's length as the drop-ins read it (a calendar day, week or month as 1, 7 or 31 days).
struct DropInPolicy {
    std::int64_t limit = 1;
    Micros length = 0;
};

class Context {
  public:
    Context(std::uint64_t seed, Midnights midnights)
        : random(seed), midnights(std::move(midnights)) {
        // Plain keys, and keys that an array literal or a byte count could get wrong.
        std::vector<std::string> names;
        for (int i = 0; i < 10; ++i)
            names.push_back("k" + std::to_string(i));
        names.push_back("\u043a\u043b\u044e\u0447 \u00e9");
        names.push_back("a b'c\"d,{e}\\f NULL");
        names.push_back(std::string(255, 'm') + "!");
        for (std::size_t i = 0; i < names.size(); ++i) {
            const std::string& home = kAlgorithms[i % kAlgorithms.size()];
            const bool steady = i < kAlgorithms.size();
            keys.push_back(
                PoolKey{names[i], home, steady,
                        steady ? steady_profile(random, home) : random_profile(random, home)});
        }
        clock = kClockStart + random.between(0, 30 * kDay);
    }

    Random random;
    const Midnights midnights;
    std::vector<PoolKey> keys;
    Micros clock = 0;
    std::deque<Call> queued;                                // a scenario's calls still to make
    std::map<std::string, DropInSession> drop_in_sessions;  // by app
    // By name: the policies the drop-ins' calls may pass the values of (a policy whose last
    // write may have been refused is left out).
    std::map<std::string, DropInPolicy> drop_in_policies;

    PoolKey& pick_key() { return keys[random.next() % keys.size()]; }

    // A key whose state other calls may change at will: a batch's keys share one limit, and a
    // reset or a block would cut a steady key's run short.
    PoolKey& pick_restless_key() {
        const std::size_t steady = kAlgorithms.size();
        return keys[steady + random.next() % (keys.size() - steady)];
    }

    // A key no call has named yet.
    std::string fresh_key() { return "fresh:" + std::to_string(++fresh_); }

    // A user id no call has named yet.
    std::string fresh_user() {
        const std::string number = std::to_string(++fresh_users_);
        return "00000000-0000-4000-8000-" + std::string(12 - number.size(), '0') + number;
    }

    // The limit of a call on `key`: mostly the key's own; sometimes the key's limit changes
    // for good (a new limit, burst or algorithm), sometimes one call uses another algorithm.
    Profile profile_for(PoolKey& key) {
        const double dice = random.unit();
        Profile& own = key.profile;
        if (key.steady) {
            if (dice < 0.002)
                own = steady_profile(random, key.home);
            else if (dice < 0.005 && !own.period.calendar)
                own.limit =
                    std::clamp<std::int64_t>(own.limit + random.between(-3, 3), 1, kMaxInteger);
            if (own.burst)
                own.burst = std::min(*own.burst, most_burst(own.limit, own.period.length));
            return own;
        }
        if (dice < 0.03) {
            own = random_profile(random, random.chance(0.7) ? key.home : random.pick(kAlgorithms));
        } else if (dice < 0.08) {
            own.limit = random.chance(0.5) ? std::clamp<std::int64_t>(
                                                 own.limit + random.between(-3, 3), 1, kMaxInteger)
                                           : random_limit(random);
            if (own.burst)
                own.burst = random_burst(random, own.limit, own.period.length);
        } else if (dice < 0.11 && is_bucket(own.algorithm)) {
            own.burst = random.chance(0.3) ? std::nullopt
                                           : std::optional<std::int64_t>(random_burst(
                                                 random, own.limit, own.period.length));
        }
        Profile profile = own;
        if (random.chance(0.05)) {
            profile.algorithm = random.pick(kAlgorithms);
            if (!is_bucket(profile.algorithm))
                profile.burst.reset();
            if (profile.period.calendar && profile.algorithm != "fixed_window" &&
                random.chance(0.7)) {
                profile.period = random.pick(kPeriods);
                profile.zone.reset();
            }
        }
        return profile;
    }

    // Moves the clock before a call whose period is `period`: not at all, by milliseconds (so
    // that instants meet window edges exactly), by seconds to days, by exactly a period (an
    // entry leaving the window right then), backwards, or to just around the next local
    // midnight of a zone (where calendar windows turn).
    void move_clock(const Call& call) {
        if (call.at) {
            clock = *call.at;
            return;
        }
        if (call.move) {
            if (call.align > 0)
                clock = (clock / call.align + 1) * call.align;
            clock += *call.move;
            return;
        }
        const Micros period = call.period;
        const double dice = random.unit();
        Micros step = 0;
        bool whole_milliseconds = random.chance(0.8);
        if (dice < 0.20) {
            step = 0;
        } else if (dice < 0.60) {
            step = random.between(0, 40 * kMillisecond);
        } else if (dice < 0.70) {
            step = random.between(0, 5 * kMillisecond);
        } else if (dice < 0.82) {
            step = random.between(0, 2 * kSecond);
        } else if (dice < 0.88) {
            step = -random.between(0, 200 * kMillisecond);
        } else if (dice < 0.885) {
            step = -random.between(0, kDay);
        } else if (dice < 0.955) {
            step = period > 0 && period <= 3 * kDay ? period + random.pick(exact_offsets_)
                                                    : random.between(0, 40 * kMillisecond);
            whole_milliseconds = false;
        } else if (dice < 0.975) {
            step = random.between(0, kMinute);
        } else if (dice < 0.99) {
            step = random.between(0, kHour);
        } else if (dice < 0.9935) {
            step = random.between(0, 3 * kDay);
        } else if (dice < 0.994) {
            step = random.between(0, 40 * kDay);
        } else {
            clock = next_midnight() + random.pick(midnight_offsets_);
            if (random.chance(0.3))
                clock += random.between(-2 * kSecond, 2 * kSecond);
            return;
        }
        if (whole_milliseconds)
            step -= step % kMillisecond;
        clock += step;
        if (clock >= kClockEnd)
            clock = kClockStart + random.between(0, 365 * kDay);
    }

  private:
    Micros next_midnight() const {
        const std::vector<Micros>& all = midnights.all;
        const auto next = std::upper_bound(all.begin(), all.end(), clock);
        return next == all.end() ? all.front() : *next;
    }

    const std::vector<Micros> exact_offsets_ = {0, 0, 0, 0, -1, 1};
    const std::vector<Micros> midnight_offsets_ = {0, 0, -1, 1, -kMillisecond, kMillisecond};
    long fresh_ = 0;
    long fresh_users_ = 0;
};

// ---- the generators: one per area of the API ----------------------------------------------

// A call of consume, peek, refund or allow, with these arguments.
struct LimitCall {
    std::string function;
    std::string key;
    Profile profile;
    std::int64_t cost = 1;
    std::string engine = "table";
    Value max_wait;  // consume only
};

Call make_limit_call(Random& random, const LimitCall& limit, bool bad_inputs) {
    Call call;
    call.function = limit.function;
    call.memory = limit.engine == "memory";
    const Profile& profile = limit.profile;
    std::vector<Argument> arguments = {
        required("p_key", "text", limit.key),
        required("p_limit", "integer", number(profile.limit)),
        required("p_period", "interval", profile.period.text),
        defaulted("p_cost", "integer", number(limit.cost), "1"),
        defaulted("p_algorithm", "text", profile.algorithm, "fixed_window"),
        defaulted("p_engine", "text", limit.engine, "table"),
        defaulted("p_burst", "integer", optional_number(profile.burst), std::nullopt),
        defaulted("p_time_zone", "text", profile.zone, std::nullopt),
    };
    if (limit.function == "consume")
        arguments.push_back(defaulted("p_max_wait", "interval", limit.max_wait, std::nullopt));
    if (bad_inputs && !call.memory)
        give_bad_arguments(random, arguments);
    call.keys = {limit.key};
    call.period = profile.period.length;
    write_call(random, call, arguments);
    return call;
}

// consume, peek, refund and allow: one key, a limit, a cost.
Call limit_call(Context& context, const std::string& function, bool fresh_key) {
    Random& random = context.random;
    LimitCall limit;
    limit.function = function;
    PoolKey& pool_key = context.pick_key();
    limit.key = fresh_key || random.chance(0.03) ? context.fresh_key() : pool_key.key;
    limit.profile = context.profile_for(pool_key);
    const Profile& profile = limit.profile;
    limit.engine = random.chance(kMemory) ? "memory" : random_engine(random);
    limit.cost =
        pool_key.steady && random.chance(0.9) ? random.between(0, 2) : random_cost(random, profile);
    // A refund of more than one call could take is an error: mostly give back what fits.
    if (function == "refund" && random.chance(0.9))
        limit.cost = std::min(limit.cost, profile.burst.value_or(profile.limit));
    if (function == "consume") {
        const double dice = random.unit();
        if (dice < 0.1)
            limit.max_wait = "0";
        else if (dice < (is_bucket(profile.algorithm) ? 0.4 : 0.1))
            limit.max_wait = random.pick(kMaxWaits);
        else if (dice < (is_bucket(profile.algorithm) ? 0.55 : 0.1))
            // A period: the wait for the next unit of a limit of 1 while the clock stands still.
            limit.max_wait = profile.period.text;
    }
    return make_limit_call(random, limit, random.chance(kBadInputs));
}

// ---- scenarios: a few calls in a row on a fresh key, the clock moved exactly --------------

// Returns the first call and queues the others, which the next steps make in order.
Call start_scenario(Context& context, std::vector<Call> calls) {
    for (std::size_t i = 1; i < calls.size(); ++i)
        context.queued.push_back(std::move(calls[i]));
    return std::move(calls.front());
}

std::string micros_text(Micros length) {
    return std::to_string(length) + " microseconds";
}

// Many allowed calls at distinct instants within one period: a sliding window's log past 64
// entries (where it merges them), the other algorithms' long runs.
Call long_run(Context& context) {
    Random& random = context.random;
    LimitCall limit;
    limit.key = context.fresh_key();
    limit.profile.algorithm =
        random.chance(0.6) ? std::string("sliding_window") : random.pick(kAlgorithms);
    limit.profile.limit = random.between(65, 300);
    limit.profile.period = random.pick(std::vector<Period>{
        {"1 second", kSecond}, {"1 minute", kMinute}, {"1 hour", kHour}, {"30 days", 30 * kDay}});
    limit.engine = random_engine(random);
    std::vector<Call> calls;
    const std::int64_t count = random.between(66, 150);
    for (std::int64_t i = 0; i < count; ++i) {
        limit.function = random.chance(0.9) ? "consume" : random.chance(0.5) ? "peek" : "refund";
        limit.cost = random.chance(0.85) ? 1 : random.between(0, 3);
        Call call = make_limit_call(random, limit, false);
        if (i > 0)
            call.move = random.chance(0.1)   ? 0
                        : random.chance(0.7) ? random.between(1, 20) * kMillisecond
                                             : random.between(1, 20000);
        calls.push_back(std::move(call));
    }
    return start_scenario(context, std::move(calls));
}

// A bucket emptied, then consumes that may wait (p_max_wait) exactly as long as their turn
// takes, a microsecond less or more, while the clock stands still or moves by a token's time.
Call delay_queue(Context& context) {
    Random& random = context.random;
    LimitCall limit;
    limit.key = context.fresh_key();
    limit.profile.algorithm = random.chance(0.5) ? "token_bucket" : "gcra";
    limit.profile.limit = random.pick(std::vector<std::int64_t>{1, 2, 4, 5, 8});
    limit.profile.period = random.pick(std::vector<Period>{{"1 millisecond", kMillisecond},
                                                           {"10 milliseconds", 10 * kMillisecond},
                                                           {"1 second", kSecond},
                                                           {"00:00:02", 2 * kSecond}});
    if (random.chance(0.5))
        limit.profile.burst = random.between(1, 4);
    limit.engine = random_engine(random);
    const std::int64_t burst = limit.profile.burst.value_or(limit.profile.limit);
    const Micros token = limit.profile.period.length / limit.profile.limit;
    std::vector<Call> calls;
    limit.function = "consume";
    limit.cost = burst;
    calls.push_back(make_limit_call(random, limit, false));
    const std::int64_t count = random.between(2, 6);
    for (std::int64_t i = 0; i < count; ++i) {
        limit.cost = random.between(1, std::min<std::int64_t>(burst, 3));
        limit.max_wait = micros_text(random.between(1, 6) * token +
                                     random.pick(std::vector<Micros>{0, 0, 0, -1, 1}));
        Call call = make_limit_call(random, limit, false);
        call.move = random.chance(0.7) ? 0 : random.chance(0.5) ? token : token / 2;
        calls.push_back(std::move(call));
    }
    return start_scenario(context, std::move(calls));
}

// A window filled just before its end, then calls a microsecond before, at and after the
// instant it turns.
Call window_edges(Context& context) {
    Random& random = context.random;
    LimitCall limit;
    limit.key = context.fresh_key();
    limit.profile.algorithm = random.pick(std::vector<std::string>{
        "fixed_window", "rolling_window", "sliding_window", "sliding_window_counter"});
    limit.profile.limit = random.between(1, 4);
    limit.profile.period = random.pick(std::vector<Period>{
        {"10 milliseconds", 10 * kMillisecond}, {"1 second", kSecond}, {"1 minute", kMinute}});
    limit.engine = random_engine(random);
    const Micros length = limit.profile.period.length;
    std::vector<Call> calls;
    limit.function = "consume";
    limit.cost = limit.profile.limit;
    Call fill = make_limit_call(random, limit, false);
    fill.align = length;
    fill.move = length - random.between(1, 3);
    calls.push_back(std::move(fill));
    for (const Micros move : {Micros{0}, Micros{1}, Micros{1}, length - 2, Micros{1}, Micros{1}}) {
        limit.function = random.chance(0.8) ? "consume" : "peek";
        limit.cost = random.between(1, limit.profile.limit);
        Call call = make_limit_call(random, limit, false);
        call.move = move;
        calls.push_back(std::move(call));
    }
    return start_scenario(context, std::move(calls));
}

// A calendar window (a day, week or month from local midnight) filled before a midnight where
// daylight saving turns, then calls around it: a midnight that comes twice, or never.
Call calendar_turns(Context& context) {
    Random& random = context.random;
    if (context.midnights.turning.empty())
        return window_edges(context);
    const auto zone =
        std::next(context.midnights.turning.begin(),
                  static_cast<long>(random.next() % context.midnights.turning.size()));
    const std::vector<Micros>& instants = zone->second;
    const auto next = std::upper_bound(instants.begin(), instants.end(), context.clock);
    const Micros midnight = next == instants.end() ? instants.front() : *next;
    LimitCall limit;
    limit.key = context.fresh_key();
    limit.profile.algorithm = "fixed_window";
    limit.profile.limit = random.between(1, 3);
    limit.profile.period = random.pick(kZonedCalendarPeriods);
    limit.profile.zone = zone->first;
    limit.engine = random_engine(random);
    std::vector<Call> calls;
    limit.function = "consume";
    limit.cost = limit.profile.limit;
    for (const Micros offset : {-kHour - 1, -kHour, Micros{-1}, Micros{0}, Micros{1}, kHour - 1,
                                kHour, 2 * kHour, kDay}) {
        Call call = make_limit_call(random, limit, false);
        call.at = midnight + offset;
        calls.push_back(std::move(call));
        limit.function = random.chance(0.8) ? "consume" : "peek";
        limit.cost = random.between(1, limit.profile.limit);
    }
    return start_scenario(context, std::move(calls));
}

// A key used up under one limit (a bucket also owing what a delayed call took), then called
// under another: a smaller or larger limit, burst or period, state measured under the old one.
Call limit_changes(Context& context) {
    Random& random = context.random;
    LimitCall limit;
    limit.key = context.fresh_key();
    const std::string algorithm = random.pick(kAlgorithms);
    limit.profile = random_profile(random, algorithm);
    if (is_bucket(algorithm) && random.chance(0.4)) {
        // Near the integer bounds over a long period: what is owed is counted in the billions.
        limit.profile.period = random.pick(kLongPeriods);
        limit.profile.limit = random.chance(0.5) ? random.between(kMaxInteger - 2, kMaxInteger)
                                                 : random.between(1000000, kMaxInteger);
        limit.profile.burst.reset();
        if (random.chance(0.5))
            limit.profile.burst =
                random_burst(random, limit.profile.limit, limit.profile.period.length);
    }
    limit.engine = random_engine(random);
    const auto allowance = [&] { return limit.profile.burst.value_or(limit.profile.limit); };
    std::vector<Call> calls;
    limit.function = "consume";
    limit.cost = allowance();
    calls.push_back(make_limit_call(random, limit, false));
    limit.cost = random.between(1, allowance());
    if (is_bucket(algorithm))
        limit.max_wait = limit.profile.period.text;
    calls.push_back(make_limit_call(random, limit, false));
    limit.max_wait.reset();

    if (random.chance(0.5)) {
        limit.profile = random_profile(random, algorithm);
    } else {
        limit.profile.limit = random.chance(0.5) ? random.between(1, 10) : random_limit(random);
        if (limit.profile.burst)
            limit.profile.burst =
                random_burst(random, limit.profile.limit, limit.profile.period.length);
    }
    const std::int64_t count = random.between(1, 3);
    for (std::int64_t i = 0; i < count; ++i) {
        limit.function = random.pick(std::vector<std::string>{"consume", "peek", "refund"});
        limit.cost = std::min(random_cost(random, limit.profile), allowance());
        calls.push_back(make_limit_call(random, limit, false));
    }
    return start_scenario(context, std::move(calls));
}

// An array of 10,001 keys, one more than consume_many takes.
const std::string& too_many_keys() {
    static const std::string text = [] {
        std::vector<Value> keys;
        for (int i = 0; i < 10001; ++i)
            keys.push_back("k" + std::to_string(i % 10));
        return array_text(keys);
    }();
    return text;
}

// consume_many and peek_many: the same limit for a few keys (a key may come twice), now and
// then hundreds or thousands, once in a long while the 10,000 they take.
Call many_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = random.chance(0.6) ? "consume_many" : "peek_many";
    const Profile profile = context.profile_for(context.pick_restless_key());
    const double dice = random.unit();
    const std::int64_t count = dice < 0.8      ? random.between(1, 6)
                               : dice < 0.985  ? random.between(7, 40)
                               : dice < 0.9978 ? random.between(41, 500)
                               : dice < 0.9998 ? random.between(501, 9999)
                                               : 10000;
    std::vector<Value> keys;
    std::set<std::string> named;
    for (std::int64_t i = 0; i < count; ++i) {
        const std::string key = count <= 100 && random.chance(0.1)
                                    ? context.fresh_key()
                                    : context.pick_restless_key().key;
        keys.push_back(key);
        named.insert(key);
    }
    Value keys_text = array_text(keys);
    call.memory = random.chance(kMemory);
    std::vector<Argument> arguments = {
        required("p_keys", "text[]", keys_text),
        required("p_limit", "integer", number(profile.limit)),
        required("p_period", "interval", profile.period.text),
        defaulted("p_cost", "integer", number(random_cost(random, profile)), "1"),
        defaulted("p_algorithm", "text", profile.algorithm, "fixed_window"),
        defaulted("p_engine", "text", call.memory ? "memory" : random_engine(random), "table"),
        defaulted("p_burst", "integer", optional_number(profile.burst), std::nullopt),
        defaulted("p_time_zone", "text", profile.zone, std::nullopt),
    };
    if (!call.memory && random.chance(kBadInputs)) {
        if (random.chance(0.5)) {
            const std::vector<Value> bad_keys = {
                std::nullopt,
                "{}",
                too_many_keys(),
                "{k0,NULL}",
                "{\"\",k1}",
                array_text({"k2", std::string(257, 'k')}),
                "{{k0},{k1}}",
                "[0:1]={k0,NULL}",
                // Valid, with bounds other than 1: elements are still named from 1.
                "[0:2]={k0,k1,k0}",
            };
            arguments[0].value = random.pick(bad_keys);
        } else {
            give_bad_arguments(random, arguments);
        }
    }
    call.keys.assign(named.begin(), named.end());
    call.period = profile.period.length;
    write_call(random, call, arguments);
    return call;
}

// consume_all: one to sixteen limits decided as one, each on its key, engine and algorithm.
Call consume_all_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "consume_all";
    const double dice = random.unit();
    const std::int64_t count = dice < 0.25  ? 1
                               : dice < 0.6 ? 2
                               : dice < 0.8 ? 3
                               : dice < 0.9 ? 4
                                            : random.between(5, 16);
    call.memory = random.chance(kMemory);

    // The arrays; std::nullopt for an array not given (NULL).
    using Array = std::optional<std::vector<Value>>;
    Array keys(std::vector<Value>{}), limits(std::vector<Value>{}), periods(std::vector<Value>{});
    Array algorithms(std::vector<Value>{}), engines(std::vector<Value>{});
    Array bursts(std::vector<Value>{}), enforced(std::vector<Value>{});
    std::vector<std::size_t> order(context.keys.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    random.shuffle(order);
    bool any_burst = false;
    bool all_fixed = true;
    bool all_table = true;
    for (std::int64_t i = 0; i < count; ++i) {
        std::string key;
        Profile profile;
        if (static_cast<std::size_t>(i) < order.size() && random.chance(0.95)) {
            PoolKey& pool_key = context.keys[order[i]];
            key = pool_key.key;
            profile = context.profile_for(pool_key);
        } else {
            key = context.fresh_key();
            profile = random_profile(random, random.pick(kAlgorithms));
        }
        if (profile.period.calendar) {
            profile.period = random.pick(kPeriods);
            profile.zone.reset();
        }
        const std::string engine = call.memory ? "memory" : random_engine(random);
        keys->push_back(key);
        limits->push_back(number(profile.limit));
        periods->push_back(profile.period.text);
        algorithms->push_back(profile.algorithm);
        engines->push_back(engine);
        bursts->push_back(optional_number(profile.burst));
        enforced->push_back(random.chance(0.8) ? "t" : "f");
        any_burst = any_burst || profile.burst.has_value();
        all_fixed = all_fixed && profile.algorithm == "fixed_window";
        all_table = all_table && engine == "table";
        call.keys.push_back(key);
        call.period = std::max(call.period, profile.period.length);
    }
    // Without p_algorithms every limit is fixed_window, which takes no burst.
    if (all_fixed || (!any_burst && random.chance(0.1)))
        algorithms.reset();
    if (!call.memory && (all_table || random.chance(0.1)))
        engines.reset();
    if (!any_burst && random.chance(0.5))
        bursts.reset();
    if (random.chance(0.6))
        enforced.reset();
    const double cost_dice = random.unit();
    Value cost = number(cost_dice < 0.1    ? 0
                        : cost_dice < 0.7  ? 1
                        : cost_dice < 0.9  ? random.between(2, 5)
                        : cost_dice < 0.95 ? random.between(6, 100000)
                                           : kMaxInteger);

    bool two_dimensional = false;
    if (!call.memory && random.chance(kBadInputs * 1.5)) {
        const auto index = static_cast<std::size_t>(random.next() % keys->size());
        switch (random.next() % 14) {
            case 0:
                (*keys)[index] = random.pick(bad_values("p_key"));
                break;
            case 1:
                keys->clear();
                break;
            case 2:
                // Seventeen limits, one more than it takes.
                while (keys->size() < 17) {
                    keys->push_back(context.fresh_key());
                    limits->push_back("5");
                    periods->push_back("1 second");
                    if (algorithms)
                        algorithms->push_back("fixed_window");
                    if (engines)
                        engines->push_back("table");
                    if (bursts)
                        bursts->push_back(std::nullopt);
                    if (enforced)
                        enforced->push_back("t");
                }
                break;
            case 3:
                // A key twice on the same engine.
                if (keys->size() >= 2) {
                    (*keys)[1] = (*keys)[0];
                    if (engines)
                        (*engines)[1] = (*engines)[0];
                }
                break;
            case 4:
                (*limits)[index] = random.pick(bad_values("p_limit"));
                break;
            case 5:
                (*periods)[index] = random.pick(bad_values("p_period"));
                break;
            case 6:
                if (!algorithms)
                    algorithms = std::vector<Value>(keys->size(), Value("fixed_window"));
                (*algorithms)[index] = random.pick(bad_values("p_algorithm"));
                break;
            case 7:
                if (!engines)
                    engines = std::vector<Value>(keys->size(), Value("table"));
                (*engines)[index] = random.pick(bad_values("p_engine"));
                break;
            case 8:
                if (!bursts)
                    bursts = std::vector<Value>(keys->size(), std::nullopt);
                (*bursts)[index] = random.pick(bad_values("p_burst"));
                break;
            case 9:
                if (!enforced)
                    enforced = std::vector<Value>(keys->size(), Value("t"));
                (*enforced)[index] = std::nullopt;
                break;
            case 10: {
                // One array a limit longer or shorter than p_keys.
                std::vector<Array*> arrays = {&limits, &periods};
                for (Array* array : {&algorithms, &engines, &bursts, &enforced}) {
                    if (*array)
                        arrays.push_back(array);
                }
                Array& array = *random.pick(arrays);
                if (random.chance(0.5) || array->empty())
                    array->push_back(array->empty() ? Value("1") : array->back());
                else
                    array->pop_back();
                break;
            }
            case 11:
                cost = random.pick(bad_values("p_cost"));
                break;
            case 12:
                random.pick(std::vector<Array*>{&keys, &limits, &periods})->reset();
                break;
            default:
                two_dimensional = true;
                break;
        }
    }

    const auto text = [](const Array& array) {
        return array ? Value(array_text(*array)) : std::nullopt;
    };
    // An array of keys must be one-dimensional.
    const Value keys_text = two_dimensional ? Value("{{k0},{k1}}") : text(keys);
    const std::vector<Argument> arguments = {
        required("p_keys", "text[]", keys_text),
        required("p_limits", "integer[]", text(limits)),
        required("p_periods", "interval[]", text(periods)),
        defaulted("p_algorithms", "text[]", text(algorithms), std::nullopt),
        defaulted("p_engines", "text[]", text(engines), std::nullopt),
        defaulted("p_bursts", "integer[]", text(bursts), std::nullopt),
        defaulted("p_enforced", "boolean[]", text(enforced), std::nullopt),
        defaulted("p_cost", "integer", cost, "1"),
    };
    write_call(random, call, arguments);
    return call;
}

Call reset_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "reset";
    const std::string key = random.chance(0.1)   ? context.fresh_key()
                            : random.chance(0.9) ? context.pick_restless_key().key
                                                 : context.pick_key().key;
    call.memory = random.chance(kMemory * 1.5);
    std::vector<Argument> arguments = {
        required("p_key", "text", key),
        defaulted("p_engine", "text", call.memory ? "memory" : random_engine(random), "table"),
    };
    if (!call.memory && random.chance(kBadInputs))
        give_bad_arguments(random, arguments);
    call.keys = {key};
    write_call(random, call, arguments);
    return call;
}

Call block_call(Context& context, bool fresh_key) {
    Random& random = context.random;
    Call call;
    call.function = "block";
    const std::string key = fresh_key || random.chance(0.1) ? context.fresh_key()
                            : random.chance(0.9)            ? context.pick_restless_key().key
                                                            : context.pick_key().key;
    call.memory = random.chance(kMemory * 1.5);
    // Long blocks are rare: a blocked key decides nothing until a reset.
    std::string duration = random.pick(kBlockDurations);
    if (duration == "365 days" && random.chance(0.8))
        duration = "2 seconds";
    std::vector<Argument> arguments = {
        required("p_key", "text", key),
        required("p_duration", "interval", duration),
        defaulted("p_engine", "text", call.memory ? "memory" : random_engine(random), "table"),
    };
    if (!call.memory && random.chance(kBadInputs))
        give_bad_arguments(random, arguments);
    call.keys = {key};
    write_call(random, call, arguments);
    return call;
}

// The first and last instants the clock may read, on keys of their own (a key decided in the
// year 9999 would stand still there for the rest of the run).
Call clock_edge_call(Context& context) {
    Random& random = context.random;
    Call call = random.chance(0.7)
                    ? limit_call(context, random.chance(0.5) ? "consume" : "peek", true)
                    : block_call(context, true);
    call.clock = random.pick(
        std::vector<std::string>{"1970-01-01 00:00:00+00", "1970-01-01 00:00:00.001+00",
                                 "9999-12-31 00:00:00+00", "9999-12-31 23:59:59.999999+00"});
    return call;
}

// ---- policies: the policy tables written alike, and the calls that decide by them -----------

// A small pool of policies, tiers and callers, so that rows and counters meet again and again.
const std::vector<std::string> kPolicyNames = {"api.read", "api:write", "login-ip",
                                               "rpc.game", "p_4",       "Quota.5"};
const std::vector<std::string> kTierNames = {"free", "pro", "admin"};
const std::vector<std::string> kSubjects = {"s0",
                                            "s1",
                                            "s2",
                                            "s3",
                                            "user-42",
                                            "10.0.0.1",
                                            "\u043a\u043b\u044e\u0447 \u00e9",
                                            "a b'c\"d,{e}\\f NULL"};
const std::vector<Value> kUsers = {
    std::nullopt, std::nullopt, "00000000-0000-4000-8000-000000000001",
    "00000000-0000-4000-8000-000000000002", "c0ffee00-1234-4abc-9def-0123456789ab"};
const std::vector<Value> kIps = {std::nullopt,  std::nullopt,  "10.0.0.1", "10.1.2.3",
                                 "192.168.1.7", "2001:db8::1", "::1"};
const std::vector<std::string> kIpRanges = {"10.0.0.0/8", "10.0.0.1/32", "192.168.1.0/24",
                                            "2001:db8::/32", "::1/128"};
const std::vector<std::string> kPenaltySteps = {"50 milliseconds", "1 second", "5 seconds",
                                                "1 minute"};
const std::vector<std::string> kPenaltyDecays = {"100 milliseconds", "1 second", "10 seconds",
                                                 "1 minute"};

// A policy's limit at most this, and check_http's cost at most kMostHttpCost: check_http's 429
// body counts the denied call ("Current:") as an SQL integer, an overflow is an error (22003)
// after the denial was decided, and the C edition's denial queue then logs the denial of the
// rolled-back call while the SQL edition does not (docs/sql-edition.md). The limit times a
// tier's largest multiplier, plus the cost, stays below it (check_http, and http_body of a
// check); http_body meets the overflow with decisions written out.
constexpr std::int64_t kMostPolicyLimit = 1000000;
constexpr std::int64_t kMostHttpCost = 1000000000;

// A policy name: mostly one of the pool, now and then one that no row has.
std::string random_policy_name(Random& random) {
    return random.chance(0.97) ? random.pick(kPolicyNames) : std::string("no.such.policy");
}

// Mostly one of two busy subjects, so that the pool's limits bite.
std::string random_subject(Context& context) {
    Random& random = context.random;
    if (random.chance(0.03))
        return context.fresh_key();
    return random.chance(0.5) ? kSubjects[random.next() % 2] : random.pick(kSubjects);
}

Value random_tier(Random& random) {
    const double dice = random.unit();
    if (dice < 0.5)
        return std::nullopt;
    if (dice < 0.95)
        return random.pick(kTierNames);
    return std::string("no_such_tier");
}

// A cost against the pool's small limits: none, one, a few, above most limits, the most.
std::int64_t random_policy_cost(Random& random) {
    const double dice = random.unit();
    if (dice < 0.08)
        return 0;
    if (dice < 0.70)
        return 1;
    if (dice < 0.85)
        return random.between(2, 4);
    if (dice < 0.97)
        return random.between(5, 50);
    return kMaxInteger;
}

// An instant near the clock, for expires_at: mostly ahead, sometimes already past.
Value near_clock(Context& context) {
    Random& random = context.random;
    return clock_text(context.clock + random.between(-2 * kSecond, 20 * kSecond));
}

// A policy row written whole (inserted, or replacing the row of that name), one column changed,
// or the row deleted (its overrides and list entries go with it). Now and then a value the
// validation trigger must refuse alike. No memory engine, lookups or reset_jitter (random).
Call policy_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "policies";
    const std::string name = random.pick(kPolicyNames);
    call.policies = {name};
    const double dice = random.unit();
    if (dice < 0.06) {
        call.sql = "DELETE FROM ratelimit.policies WHERE name = $1::text RETURNING name";
        call.params = {name};
        return call;
    }
    if (dice < 0.3) {
        const std::vector<std::pair<std::string, Value>> changes = {
            {"\"limit\" = $2::integer", number(random.between(1, 10))},
            {"\"limit\" = $2::integer", number(std::min(random_limit(random), kMostPolicyLimit))},
            {"shadow = NOT shadow AND $2::boolean", "t"},
            {"count_denied = NOT count_denied AND $2::boolean", "t"},
            {"hash_key = NOT hash_key AND $2::boolean", "t"},
            {"log_denials = NOT log_denials AND $2::boolean", "t"},
            {"engine = $2::text", random_engine(random)},
            {"max_delay = $2::interval",
             random.chance(0.5) ? Value(random.pick(kMaxWaits)) : std::nullopt},
            {"burst = $2::integer",
             random.chance(0.5) ? number(random.between(1, 10)) : std::nullopt},
            {"penalty_blocks = NULL, penalty_decay = $2::interval", std::nullopt},
        };
        const auto& change = random.pick(changes);
        call.sql =
            "UPDATE ratelimit.policies SET " + change.first + " WHERE name = $1::text RETURNING *";
        call.params = {name, change.second};
        return call;
    }
    Profile profile = random_profile(random, random.pick(kAlgorithms));
    profile.limit = std::min(profile.limit, kMostPolicyLimit);
    if (random.chance(0.6))
        profile.limit = random.between(1, 5);
    if (!profile.period.calendar && random.chance(0.5)) {
        // Periods long enough that the window holds many calls: the clock moves by hours
        // between two calls on one subject.
        profile.period = random.pick(
            std::vector<Period>{{"1 hour", kHour}, {"1 day", kDay}, {"7 days", 7 * kDay}});
        profile.burst.reset();
    }
    if (profile.burst)
        profile.burst = std::min(
            {*profile.burst, most_burst(profile.limit, profile.period.length), kMostPolicyLimit});
    Value algorithm = profile.algorithm;
    Value limit = number(profile.limit);
    Value period = profile.period.text;
    Value burst = optional_number(profile.burst);
    Value engine = random_engine(random);
    Value zone = profile.zone;
    Value quota_unit =
        random.chance(0.2)
            ? Value(random.pick(std::vector<std::string>{"requests", "content-bytes", "tokens"}))
            : std::nullopt;
    Value max_delay;
    if (is_bucket(profile.algorithm) ? random.chance(0.3) : random.chance(0.01))
        max_delay = random.pick(kMaxWaits);
    Value blocks;
    Value decay;
    if (random.chance(0.2)) {
        std::vector<Value> steps;
        const std::int64_t count = random.between(1, 3);
        for (std::int64_t i = 0; i < count; ++i)
            steps.push_back(random.pick(kPenaltySteps));
        blocks = array_text(steps);
        decay = random.pick(kPenaltyDecays);
    }
    if (random.chance(kBadInputs)) {
        switch (random.next() % 6) {
            case 0:
                limit = random.pick(bad_values("p_limit"));
                break;
            case 1:
                period = random.pick(bad_values("p_period"));
                break;
            case 2:
                algorithm = random.pick(bad_values("p_algorithm"));
                break;
            case 3:
                burst = random.pick(bad_values("p_burst"));
                break;
            case 4:
                zone = random.pick(bad_values("p_time_zone"));
                break;
            default:
                // Penalties need both columns; steps must be intervals within bounds.
                blocks = random.chance(0.5) ? Value(std::nullopt) : Value("{0}");
                decay = "1 second";
                break;
        }
    }
    call.sql =
        "INSERT INTO ratelimit.policies AS p (name, algorithm, \"limit\", period, burst, engine,"
        " count_denied, shadow, hash_key, log_denials, quota_unit, time_zone, penalty_blocks,"
        " penalty_decay, max_delay) VALUES ($1::text, $2::text, $3::integer, $4::interval,"
        " $5::integer, $6::text, $7::boolean, $8::boolean, $9::boolean, $10::boolean, $11::text,"
        " $12::text, $13::interval[], $14::interval, $15::interval)"
        " ON CONFLICT (name) DO UPDATE SET algorithm = EXCLUDED.algorithm,"
        " \"limit\" = EXCLUDED.\"limit\", period = EXCLUDED.period, burst = EXCLUDED.burst,"
        " engine = EXCLUDED.engine, count_denied = EXCLUDED.count_denied,"
        " shadow = EXCLUDED.shadow, hash_key = EXCLUDED.hash_key,"
        " log_denials = EXCLUDED.log_denials, quota_unit = EXCLUDED.quota_unit,"
        " time_zone = EXCLUDED.time_zone, penalty_blocks = EXCLUDED.penalty_blocks,"
        " penalty_decay = EXCLUDED.penalty_decay, max_delay = EXCLUDED.max_delay RETURNING *";
    const auto flag = [&](double probability) {
        return Value(random.chance(probability) ? "t" : "f");
    };
    call.params = {name,      algorithm, limit,      period, burst,  engine, flag(0.2), flag(0.15),
                   flag(0.2), flag(0.4), quota_unit, zone,   blocks, decay,  max_delay};
    return call;
}

// A tier's multiplier or bypass written, or the tier deleted.
Call tier_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "tiers";
    call.policies = kPolicyNames;
    const std::string name = random.pick(kTierNames);
    if (random.chance(0.04)) {
        call.sql = "DELETE FROM ratelimit.tiers WHERE name = $1::text RETURNING *";
        call.params = {name};
        return call;
    }
    const std::vector<std::string> multipliers = {"0.5",   "1",    "2",    "1.5", "3.3333",
                                                  "0.001", "1000", "0.25", "0",   "1001"};
    call.sql =
        "INSERT INTO ratelimit.tiers (name, multiplier, bypass) VALUES ($1::text, $2::numeric,"
        " $3::boolean) ON CONFLICT (name) DO UPDATE SET multiplier = EXCLUDED.multiplier,"
        " bypass = EXCLUDED.bypass RETURNING *";
    call.params = {name, random.pick(multipliers), random.chance(0.1) ? "t" : "f"};
    return call;
}

// A key's own limit, multiplier or bypass under a policy, until an instant or for good; or
// deleted.
Call override_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "key_overrides";
    const std::string policy = random_policy_name(random);
    const std::string key = random.pick(kSubjects);
    call.policies = {policy};
    if (random.chance(0.2)) {
        call.sql =
            "DELETE FROM ratelimit.key_overrides WHERE policy = $1::text AND key = $2::text"
            " RETURNING policy, key";
        call.params = {policy, key};
        return call;
    }
    Value limit;
    Value multiplier;
    const double dice = random.unit();
    if (dice < 0.4)
        limit = number(random.between(1, 10));
    else if (dice < 0.75)
        multiplier = random.pick(std::vector<std::string>{"0.5", "2", "10", "0.001"});
    else if (dice < 0.8)
        limit = random.chance(0.5) ? "0" : "-1";  // refused by the check constraint
    else if (dice < 0.85) {
        limit = "3";
        multiplier = "2";  // one change at most
    }
    call.sql =
        "INSERT INTO ratelimit.key_overrides (policy, key, \"limit\", multiplier, bypass,"
        " expires_at) VALUES ($1::text, $2::text, $3::integer, $4::numeric, $5::boolean,"
        " $6::timestamptz) ON CONFLICT (policy, key) DO UPDATE SET \"limit\" = EXCLUDED.\"limit\","
        " multiplier = EXCLUDED.multiplier, bypass = EXCLUDED.bypass,"
        " expires_at = EXCLUDED.expires_at RETURNING policy, key, \"limit\", multiplier, bypass,"
        " expires_at";
    call.params = {policy,
                   key,
                   limit,
                   multiplier,
                   random.chance(0.15) ? "t" : "f",
                   random.chance(0.6) ? std::nullopt : near_clock(context)};
    return call;
}

// An allow or deny entry for a key, a user or an IP range, for one policy or all, until an
// instant or for good; or the entries of a subject deleted (so that the list stays short).
// created_at (the real time) is left out of what is compared.
Call access_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.function = "access_list";
    const int kind = static_cast<int>(random.next() % 3);
    const std::vector<std::string> columns = {"key", "user_id", "ip"};
    const std::vector<std::string> types = {"text", "uuid", "cidr"};
    Value subject = kind == 0   ? Value(random.pick(kSubjects))
                    : kind == 1 ? random.pick(std::vector<Value>(kUsers.begin() + 2, kUsers.end()))
                                : Value(random.pick(kIpRanges));
    const std::string returned = " RETURNING action, policy, user_id, key, ip, expires_at";
    if (random.chance(0.45)) {
        call.policies = kPolicyNames;
        // In an order of its own: the rows' order on disk may differ between the databases.
        call.sql = "WITH gone AS (DELETE FROM ratelimit.access_list WHERE " + columns[kind] +
                   " = $1::" + types[kind] + returned +
                   ") SELECT * FROM gone ORDER BY action, policy, user_id, key, ip, expires_at";
        call.params = {subject};
        return call;
    }
    const Value policy = random.chance(0.25) ? std::nullopt : Value(random_policy_name(random));
    call.policies = policy ? std::vector<std::string>{*policy} : kPolicyNames;
    call.sql = "INSERT INTO ratelimit.access_list (action, policy, " + columns[kind] +
               ", expires_at) VALUES ($1::text, $2::text, $3::" + types[kind] +
               ", $4::timestamptz)" + returned;
    const Value action =
        random.chance(0.02) ? Value("block") : Value(random.chance(0.5) ? "allow" : "deny");
    call.params = {action, policy, subject,
                   random.chance(0.3) ? std::nullopt : near_clock(context)};
    return call;
}

// The arguments every policy call shares after its subjects.
void add_caller_arguments(Context& context, std::vector<Argument>& arguments) {
    Random& random = context.random;
    arguments.push_back(defaulted("p_cost", "integer", number(random_policy_cost(random)), "1"));
    arguments.push_back(defaulted("p_tier", "text", random_tier(random), std::nullopt));
    arguments.push_back(defaulted("p_ip", "inet", random.pick(kIps), std::nullopt));
    arguments.push_back(defaulted("p_user", "uuid", random.pick(kUsers), std::nullopt));
}

// Bad values of the policy calls' arguments, by name.
void give_bad_policy_argument(Random& random, std::vector<Argument>& arguments) {
    Argument& argument = arguments[random.next() % arguments.size()];
    const std::string& name = argument.name;
    if (name == "p_policy")
        argument.value = random.chance(0.5) ? Value(std::nullopt) : Value("");
    else if (name == "p_key")
        argument.value = random.pick(bad_values("p_key"));
    else if (name == "p_cost")
        argument.value = random.pick(bad_values("p_cost"));
    else if (name == "p_tier")
        argument.value = random.chance(0.5) ? Value("") : Value(std::string(300, 't'));
    else if (name == "p_policies" || name == "p_keys" || name == "p_subjects")
        argument.value =
            random.pick(std::vector<Value>{std::nullopt, "{}", "{NULL}", "{\"\"}",
                                           array_text({std::string(257, 'k')}), "{{a},{b}}"});
    else if (name == "p_reset_format")
        argument.value = random.pick(std::vector<Value>{std::nullopt, "", "rfc1123", "ISO8601"});
    else if (name == "p_body_shape" || name == "p_shape")
        argument.value = random.pick(std::vector<Value>{std::nullopt, "", "xml", "Problem"});
    else if (name == "p_duration")
        argument.value = random.pick(bad_values("p_duration"));
}

// check, check_many, check_all and check_http: one or a few policies of the pool, on subjects of
// the pool, with a tier, an IP and a user now and then.
Call policy_check_call(Context& context, const std::string& function) {
    Random& random = context.random;
    Call call;
    call.function = function;
    std::vector<Argument> arguments;
    if (function == "check" || function == "check_many") {
        const std::string policy = random_policy_name(random);
        call.policies = {policy};
        arguments.push_back(required("p_policy", "text", policy));
        if (function == "check") {
            const std::string subject = random_subject(context);
            call.keys = {subject};
            arguments.push_back(required("p_key", "text", subject));
        } else {
            std::vector<Value> subjects;
            const std::int64_t count = random.between(1, 6);
            for (std::int64_t i = 0; i < count; ++i) {
                subjects.push_back(random_subject(context));
                call.keys.push_back(*subjects.back());
            }
            arguments.push_back(required("p_subjects", "text[]", array_text(subjects)));
        }
    } else {
        std::vector<Value> policies;
        std::vector<Value> keys;
        const std::int64_t count = random.chance(0.6) ? 1 : random.between(2, 4);
        // Distinct policies, but now and then one named twice (refused alike).
        std::vector<std::string> names = kPolicyNames;
        random.shuffle(names);
        for (std::int64_t i = 0; i < count; ++i) {
            const std::string policy = random.chance(0.02)
                                           ? random_policy_name(random)
                                           : names[static_cast<std::size_t>(i) % names.size()];
            policies.push_back(policy);
            call.policies.push_back(policy);
            // One subject for every policy, mostly; a different one per policy now and then.
            keys.push_back(i > 0 && random.chance(0.7) ? keys.front() : random_subject(context));
            call.keys.push_back(*keys.back());
        }
        if (random.chance(kBadInputs / 2))
            keys.pop_back();  // one key fewer than policies
        arguments.push_back(required("p_policies", "text[]", array_text(policies)));
        arguments.push_back(required("p_keys", "text[]", array_text(keys)));
    }
    add_caller_arguments(context, arguments);
    if (function == "check_http") {
        Value& cost = arguments[arguments.size() - 4].value;
        cost = number(std::min(std::stoll(*cost), static_cast<long long>(kMostHttpCost)));
        arguments.push_back(defaulted("p_reset_format", "text",
                                      random.chance(0.5) ? "iso8601" : "unix", "iso8601"));
        arguments.push_back(
            defaulted("p_body_shape", "text",
                      random.pick(std::vector<std::string>{"error_message", "detailed", "problem"}),
                      "error_message"));
    }
    if (random.chance(kBadInputs))
        give_bad_policy_argument(random, arguments);
    write_call(random, call, arguments);
    return call;
}

// reset_policy_key and block_policy_key: an administrator's hand on one subject's counters.
Call policy_key_call(Context& context, const std::string& function) {
    Random& random = context.random;
    Call call;
    call.function = function;
    const std::string policy = random_policy_name(random);
    const std::string subject = random_subject(context);
    call.policies = {policy};
    call.keys = {subject};
    std::vector<Argument> arguments = {required("p_policy", "text", policy),
                                       required("p_key", "text", subject)};
    if (function == "block_policy_key") {
        std::string duration = random.pick(kBlockDurations);
        if (duration == "365 days" && random.chance(0.9))
            duration = "1 second";
        arguments.push_back(required("p_duration", "interval", duration));
    }
    if (random.chance(kBadInputs))
        give_bad_policy_argument(random, arguments);
    write_call(random, call, arguments);
    return call;
}

// http_headers and http_body of a decision check makes in the same statement, or of a decision
// written out (or NULL). A bad format or shape goes only with the latter: a denial check logged
// before the error would be written by the C edition's queue after the rollback, and by the SQL
// edition not at all (docs/sql-edition.md).
Call http_fields_call(Context& context) {
    Random& random = context.random;
    Call call;
    const bool headers = random.chance(0.5);
    call.function = headers ? "http_headers" : "http_body";
    Value format =
        headers
            ? Value(random.chance(0.5) ? "iso8601" : "unix")
            : Value(random.pick(std::vector<std::string>{"error_message", "detailed", "problem"}));
    if (random.chance(0.08)) {
        if (random.chance(0.5))
            format = random.pick(std::vector<Value>{std::nullopt, "", "json", "ISO8601"});
        const std::vector<Value> decisions = {
            std::nullopt,
            "(f,api.read,5,0,1500,1500,60000,1,limited,{},\"2026-01-01 00:00:00+00\",)",
            "(f,login-ip,1,0,,,86400000,3,deny_list,{},\"2026-01-01 00:00:00.5+00\",)",
            "(f,rpc.game,10,0,300000,60000,60000,1,penalty,{},\"2030-12-31 23:59:59+00\",2)",
            "(t,api:write,100,99,0,1000,1000,1,within_limits,{p_4},\"2026-01-01 00:00:00+00\",)",
            "(t,,,,,,,0,allow_list,{},\"2026-01-01 00:00:00+00\",)",
            "(f,rpc.game,2147483647,0,16419912198,16419912198,86400000,1,limited,{},"
            "\"2030-05-11 07:07:58.334582+00\",)",
            "(f,p_4,5,0,,,60000,2147483647,cost_exceeds_limit,{},\"2026-01-01 00:00:00+00\",)",
            "(,,,,,,,,,,,)",
        };
        call.sql =
            "SELECT ratelimit." + call.function + "($1::ratelimit.policy_decision, $2::text)";
        call.params = {random.pick(decisions), format};
        call.policies = {"api.read"};
        return call;
    }
    const std::string policy = random_policy_name(random);
    const std::string subject = random_subject(context);
    call.policies = {policy};
    call.keys = {subject};
    call.sql = "SELECT ratelimit." + call.function +
               "(ratelimit.check($1::text, $2::text, $3::integer, $4::text), $5::text)";
    call.params = {policy, subject, number(std::min(random_policy_cost(random), kMostHttpCost)),
                   random_tier(random), format};
    return call;
}

// ---- the apps' drop-ins: each app's functions in databases of their own ---------------------

// The state rows a drop-in call is compared by: the app's rows of its keys (app_rows, which
// joins the CTE keys, made by keys_sql from the call's state parameters), and the engines' rows
// in the app's namespace (where ratelimit.dropin_engine = unlogged counts).
std::string drop_in_state(const std::string& keys_sql, const std::string& app_rows,
                          const std::string& space) {
    return "WITH keys AS (" + keys_sql + ") " + app_rows +
           " UNION ALL SELECT 'key_state', k.key, k::text FROM ratelimit.key_state k"
           " JOIN keys USING (key) WHERE k.policy = '" +
           space +
           "' UNION ALL SELECT 'key_state_unlogged', k.key, k::text"
           " FROM ratelimit.key_state_unlogged k JOIN keys USING (key) WHERE k.policy = '" +
           space + "' ORDER BY 1, 2, 3";
}

// An app whose drop-ins the test drives, and the queries of its state.
struct DropInApp {
    std::string table;
    // The state rows of a call's keys ($1; for sliding_window_limits, $2 and $3 are the IPs and
    // e-mails of check_rate_limit_tiers, whose keys are their digests).
    std::string key_rows;
    // Every row of the app's table: compared every few thousand calls, and after a cleanup.
    std::string whole_table;
};

const std::map<std::string, DropInApp>& drop_in_apps() {
    static const std::map<std::string, DropInApp> kApps = {
        {"rpc_limits",
         {"rpc_rate_limits",
          drop_in_state("SELECT unnest($1::text[]) AS key",
                        "SELECT 'rpc_rate_limits' AS source, keys.key,"
                        " (r.call_count, r.window_start, r.window_expires_at, r.ip_address)::text"
                        " AS state FROM public.rpc_rate_limits r"
                        " JOIN keys ON r.user_id::text || ':' || r.rpc_name = keys.key",
                        "drop-in/rpc_rate_limits"),
          "SELECT user_id, rpc_name, call_count, window_start, window_expires_at, ip_address"
          " FROM public.rpc_rate_limits ORDER BY user_id, rpc_name"}},
        // Every window of a key: the calls count in the one still open, or open a new one, and
        // the cleanup keeps the table short.
        {"endpoint_limits",
         {"rate_limits",
          drop_in_state("SELECT unnest($1::text[]) AS key",
                        "SELECT 'rate_limits' AS source, keys.key,"
                        " (r.counter, r.window_start, r.expires_at, r.created_at)::text AS state"
                        " FROM public.rate_limits r"
                        " JOIN keys ON r.user_id::text || ':' || r.endpoint = keys.key",
                        "drop-in/rate_limits"),
          "SELECT user_id, endpoint, counter, window_start, expires_at, created_at"
          " FROM public.rate_limits ORDER BY user_id, endpoint, window_start"}},
        // A call writes the bucket of the clock's second: the buckets of the last two hours are
        // enough (a key called under a window of a year keeps every bucket of the year).
        {"sliding_window_limits",
         {"rate_limit_buckets",
          drop_in_state("SELECT unnest($1::text[]) AS key UNION SELECT 'ip:' ||"
                        " encode(sha256(convert_to(btrim(ip), 'UTF8')), 'hex')"
                        " FROM unnest($2::text[]) AS ip UNION SELECT 'email:' ||"
                        " encode(sha256(convert_to(lower(btrim(email)), 'UTF8')), 'hex')"
                        " FROM unnest($3::text[]) AS email",
                        "SELECT 'rate_limit_buckets' AS source, b.key,"
                        " (b.bucket_time, b.count, b.window_seconds)::text AS state"
                        " FROM public.rate_limit_buckets b JOIN keys USING (key)"
                        " WHERE b.bucket_time > ratelimit.clock_now() - interval '2 hours'",
                        "drop-in/rate_limit_buckets"),
          "SELECT key, bucket_time, count, window_seconds FROM public.rate_limit_buckets"
          " ORDER BY key, bucket_time"}},
    };
    return kApps;
}

// The user ids the drop-ins count under (the JWT's sub, or p_user_id), as uuid_out writes them.
const std::vector<std::string> kDropInUsers = {
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "b1ffcd00-0000-4000-8000-000000000002",
    "c2000000-0000-4000-8000-000000000003", "d3000000-0000-4000-8000-0000000000a4"};

std::string uppercase(std::string text) {
    for (char& c : text)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
}

std::string without_hyphens(std::string text) {
    text.erase(std::remove(text.begin(), text.end(), '-'), text.end());
    return text;
}

// Mostly one of two busy users, so that the limits bite.
std::string random_drop_in_user(Context& context) {
    Random& random = context.random;
    if (random.chance(0.03))
        return context.fresh_user();
    return random.chance(0.5) ? kDropInUsers[random.next() % 2] : random.pick(kDropInUsers);
}

// A user id as a caller may spell it: as uuid_out writes it, or as uuid_in also reads it.
std::string user_spelling(Random& random, const std::string& user) {
    const double dice = random.unit();
    if (dice < 0.85)
        return user;
    if (dice < 0.9)
        return uppercase(user);
    if (dice < 0.95)
        return without_hyphens(user);
    return "{" + user + "}";
}

// A name of the pool (an RPC, an endpoint, a bucket key), mostly one of the first two.
std::string random_drop_in_name(Context& context, const std::vector<std::string>& names) {
    Random& random = context.random;
    if (random.chance(0.02))
        return context.fresh_key();
    return random.chance(0.5) ? names[random.next() % 2] : random.pick(names);
}

// The claims of a signed-in user, as PostgREST sets them.
std::string user_claims(const std::string& sub) {
    return "{\"sub\":\"" + sub + "\",\"role\":\"authenticated\"}";
}

// Claims nested `depth` deep (an object, then arrays), the sub after the nesting.
std::string nested_claims(int depth, const std::string& sub) {
    return "{\"a\":" + repeated("[", depth - 1) + repeated("]", depth - 1) + ",\"sub\":\"" + sub +
           "\"}";
}

// A request's JWT: none (server code), a user's (its sub spelled as uuid_in reads it, or in the
// older request.jwt.claim.sub, which wins), an anonymous one, or one the drop-ins refuse alike
// (claims that are no JSON object, a sub that is no UUID).
Jwt random_jwt(Random& random) {
    const std::string& user = random.pick(kDropInUsers);
    const double dice = random.unit();
    if (dice < 0.25)
        return Jwt{"", "", "", true};
    if (dice < 0.65)
        return Jwt{user_claims(user), "", user, false};
    if (dice < 0.69)
        return Jwt{user_claims(uppercase(user)), "", user, false};
    if (dice < 0.72)
        return Jwt{user_claims(without_hyphens(user)), "", user, false};
    if (dice < 0.78)
        return Jwt{random.chance(0.5) ? user_claims(random.pick(kDropInUsers)) : "", user, user,
                   false};
    if (dice < 0.85)
        return Jwt{random.pick(std::vector<std::string>{"{\"role\":\"anon\"}",
                                                        "{\"sub\":null,\"role\":\"anon\"}", "{}",
                                                        "{\"aud\":\"x\",\"sub\":null}"}),
                   "", "", true};
    if (dice < 0.89) {
        // The last of two subs counts; a sub's name and value may be written with escapes; the
        // deepest nesting the claims may have.
        const std::vector<std::string> claims = {
            "{\"sub\":\"nobody\",\"sub\":\"" + user + "\"}",
            "{\"s\\u0075b\":\"" + user + "\"}",
            "{\"sub\":\"\\u0061\\u0030eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}",
            "{\"role\":\"authenticated\",\"app_metadata\":{\"sub\":\"nobody\"},\"sub\":\"" + user +
                "\"}",
            nested_claims(512, user),
        };
        const std::size_t chosen = random.next() % claims.size();
        return Jwt{claims[chosen], "", chosen == 2 ? kDropInUsers[0] : user, false};
    }
    static const std::vector<Jwt> kRefused = {
        {"{\"sub\":\"not-a-uuid\"}", "", "", false},
        {"{\"sub\":12345}", "", "", false},
        {"{\"sub\":\"\"}", "", "", false},
        {"{\"sub\":{\"id\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}}", "", "", false},
        {"{\"sub\":[\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"]}", "", "", false},
        {"{\"sub\":true}", "", "", false},
        {"[1,2]", "", "", false},
        {"\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"", "", "", false},
        {"null", "", "", false},
        {"not json", "", "", false},
        {"{\"sub\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"", "", "", false},
        {"{\"sub\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"} trailing", "", "", false},
        {"{\"sub\":\"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}\"}", "", "", false},
        {"{\"sub\":\" a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}", "", "", false},
        {"{\"sub\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1\"}", "", "", false},
        {"{\"sub\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\",\"sub\":\"x\"}", "", "", false},
        {"{\"sub\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}", "a0eebc99; DROP TABLE x; --", "",
         false},
        {"", "not-a-uuid", "", false},
        {nested_claims(513, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), "", "", false},
    };
    return random.pick(kRefused);
}

// The session of an app's next drop-in call: now and then another request's JWT, rarely a
// setting changed (the memory engine seldom: the SQL edition only refuses it).
void change_drop_in_session(Context& context, const std::string& app) {
    Random& random = context.random;
    DropInSession& session = context.drop_in_sessions[app];
    if (random.chance(0.3))
        session.jwt = random_jwt(random);
    if (random.chance(0.03)) {
        const double dice = random.unit();
        session.engine = dice < 0.6 ? "table" : dice < 0.96 ? "unlogged" : "memory";
    }
    if (random.chance(0.03))
        session.require_policy = random.chance(0.2) ? "on" : "off";
    if (random.chance(0.03))
        session.caller_limits = random.chance(0.2) ? "must_match" : "ignore";
    // Another isolation or read-only transactions for a few calls now and then.
    if (session.isolation == "read committed" ? random.chance(0.005) : random.chance(0.15))
        session.isolation = session.isolation != "read committed" ? "read committed"
                            : random.chance(0.5)                  ? "repeatable read"
                                                                  : "serializable";
    if (session.read_only == "off" ? random.chance(0.003) : random.chance(0.2))
        session.read_only = session.read_only == "off" ? "on" : "off";
    if (random.chance(0.01))
        session.jwt_roles = random.pick(std::vector<std::string>{
            "anon,authenticated", "anon,authenticated", "anon, authenticated, service_role",
            "authenticated", "\"anon\",AUTHENTICATED", "anon,\"Authenticated\""});
}

// A call of one of `app`'s drop-ins, as `role` ("": the connection's own, which is trusted), in
// the app's session.
Call drop_in_call(Context& context, const std::string& app, const std::string& function,
                  const std::string& role) {
    const DropInSession& session = context.drop_in_sessions[app];
    Call call;
    call.app = app;
    call.function = function;
    call.role = role;
    call.settings = {{"request.jwt.claims", session.jwt.claims},
                     {"request.jwt.claim.sub", session.jwt.claim_sub},
                     {"ratelimit.dropin_engine", session.engine},
                     {"ratelimit.dropin_require_policy", session.require_policy},
                     {"ratelimit.dropin_caller_limits", session.caller_limits},
                     {"ratelimit.jwt_roles", session.jwt_roles},
                     {"default_transaction_isolation", session.isolation},
                     {"default_transaction_read_only", session.read_only}};
    call.state_sql = drop_in_apps().at(app).key_rows;
    return call;
}

// The state rows compared after a drop-in call: the app's rows of these keys (and, for
// check_rate_limit_tiers, of the keys of these IPs and e-mails).
void compare_drop_in_keys(Call& call, const std::vector<std::string>& keys,
                          const std::vector<Value>& ips = {},
                          const std::vector<Value>& emails = {}) {
    call.keys = keys;
    call.state_params = {array_text(std::vector<Value>(keys.begin(), keys.end()))};
    if (call.app == "sliding_window_limits") {
        call.state_params.push_back(array_text(ips));
        call.state_params.push_back(array_text(emails));
    }
}

// A call that may change any row of the app's table (a cleanup, a user's rows deleted): the
// whole table is compared after it.
void compare_drop_in_table(Call& call) {
    call.state_sql = drop_in_apps().at(call.app).whole_table;
    call.state_params.clear();
}

// The role a drop-in call is made as, in these shares: none (the connection's, a superuser or
// the SQL edition's owner: trusted), service_role, or the role PostgREST takes for the JWT
// (authenticated with a sub, anon without; now and then the other one), where anon is refused
// the function only as often as `anon`, none taken instead otherwise.
std::string random_role(Random& random, const Jwt& jwt, double none, double service_role,
                        double anon) {
    const double dice = random.unit();
    if (dice < none)
        return "";
    if (dice < none + service_role)
        return "service_role";
    if (jwt.anonymous == random.chance(0.1))
        return "authenticated";
    return random.chance(anon) ? "anon" : "";
}

// An app's next drop-in call: its session changed now and then, and the role it is made as.
std::string next_drop_in_role(Context& context, const std::string& app, double none,
                              double service_role, double anon = 1) {
    change_drop_in_session(context, app);
    return random_role(context.random, context.drop_in_sessions[app].jwt, none, service_role, anon);
}

// Values a drop-in's argument must refuse (both editions alike), by the argument's name: SQL
// NULL, empty or too long, out of range, and text that is no value of the argument's type.
const std::vector<Value>& bad_drop_in_values(const std::string& argument) {
    static const std::vector<Value> kNames = {std::nullopt, "", std::string(257, 'n'),
                                              repeated("\u00e9", 129)};
    // An IP or e-mail is trimmed before it is keyed: only spaces are empty too.
    static const std::vector<Value> kTrimmedNames = {std::nullopt, "", "   ",
                                                     std::string(257, 'n')};
    static const std::vector<Value> kLimits = {std::nullopt, "0",   "-5", "-2147483648",
                                               "2147483648", "1.5", "ten"};
    static const std::vector<Value> kMinutes = {std::nullopt, "0",          "-1",
                                                "525601",     "2147483647", "-2147483648"};
    static const std::vector<Value> kSeconds = {std::nullopt, "0",          "-1",
                                                "31536001",   "2147483647", "-2147483648"};
    static const std::vector<Value> kIncrements = {std::nullopt, "0", "-3", "-2147483648",
                                                   "2147483648"};
    static const std::vector<Value> kCosts = {std::nullopt, "-1", "-2147483648"};
    static const std::vector<Value> kUsers = {std::nullopt, "not a uuid",
                                              "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", ""};
    static const std::vector<Value> kOlderThan = {std::nullopt, "-1 hour", "-00:00:00.000001",
                                                  "-1 mon"};
    static const std::vector<Value> kNone;
    const auto ends_with = [&](const std::string& end) {
        return argument.size() >= end.size() &&
               argument.compare(argument.size() - end.size(), end.size(), end) == 0;
    };
    if (argument == "p_ip" || argument == "p_email")
        return kTrimmedNames;
    if (argument == "p_rpc_name" || argument == "p_endpoint" || argument == "p_key")
        return kNames;
    if (argument == "p_max_calls" || ends_with("limit"))
        return kLimits;
    if (argument == "p_window_minutes")
        return kMinutes;
    if (ends_with("window_seconds"))
        return kSeconds;
    if (argument == "p_increment")
        return kIncrements;
    if (argument == "p_cost")
        return kCosts;
    if (argument == "p_user_id")
        return kUsers;
    if (argument == "p_older_than")
        return kOlderThan;
    return kNone;
}

// One bad argument, now and then two (which of them an edition names first must agree).
void give_bad_drop_in_arguments(Random& random, std::vector<Argument>& arguments) {
    const int count = random.chance(0.8) ? 1 : 2;
    for (int i = 0; i < count; ++i) {
        Argument& argument = arguments[random.next() % arguments.size()];
        const std::vector<Value>& values = bad_drop_in_values(argument.name);
        if (!values.empty())
            argument.value = random.pick(values);
    }
}

std::int64_t whole_units(Micros length, Micros unit) {
    return length / unit + (length % unit > 0 ? 1 : 0);
}

// The limit and window a drop-in call passes: half the time its policy's own when it has one
// (with ratelimit.dropin_caller_limits = must_match any other is refused), else mostly a few
// calls in one of `windows` (in the call's unit), now and then many or the most there are.
std::pair<std::int64_t, std::int64_t> random_drop_in_limit(
    Context& context, const std::string& policy, Micros unit,
    const std::vector<std::int64_t>& windows) {
    Random& random = context.random;
    const auto written = context.drop_in_policies.find(policy);
    if (written != context.drop_in_policies.end() && random.chance(0.5))
        return {written->second.limit, whole_units(written->second.length, unit)};
    const double dice = random.unit();
    const std::int64_t limit = dice < 0.5    ? random.between(1, 4)
                               : dice < 0.75 ? random.between(5, 12)
                               : dice < 0.9  ? random.between(13, 1000)
                               : dice < 0.96 ? kMaxInteger
                                             : random.between(1, kMaxInteger);
    return {limit, random.pick(windows)};
}

// ---- rpc_limits: check_rate_limit(p_rpc_name, ...) for the JWT's caller, and for a user named

const std::vector<std::string> kRpcNames = {"complete-game",
                                            "claim-daily-gift",
                                            "send-dm",
                                            "game",
                                            "login-with-username-pin",
                                            "\u043a\u043b\u044e\u0447 \u00e9",
                                            "x'); DELETE FROM rpc_rate_limits; --",
                                            "42",
                                            std::string(256, 'r')};
// The names a policy can be written for (a policy's name is [A-Za-z0-9_.:-], at most 63).
const std::vector<std::string> kRpcPolicyNames = {"complete-game", "claim-daily-gift", "send-dm",
                                                  "game"};
// Mostly an hour or a day: a key is called a few times a day of the run's clock.
const std::vector<std::int64_t> kRpcWindows = {1, 1, 5, 60, 60, 1440, 1440, 1440, 525600};

// check_rate_limit (the caller from the JWT) or check_rate_limit_for_user: `user` counts under
// `name` with this limit and window (in minutes).
Call make_rpc_call(Context& context, bool for_user, const std::string& role, std::string user,
                   const std::string& name, std::int64_t limit, std::int64_t window,
                   bool bad_inputs) {
    Random& random = context.random;
    Call call = drop_in_call(context, "rpc_limits",
                             for_user ? "check_rate_limit_for_user" : "check_rate_limit", role);
    const DropInSession& session = context.drop_in_sessions["rpc_limits"];
    std::vector<Argument> arguments;
    if (for_user)
        arguments.push_back(required("p_user_id", "uuid", user_spelling(random, user)));
    else
        user = session.jwt.user;
    arguments.push_back(required("p_rpc_name", "text", name));
    arguments.push_back(defaulted("p_max_calls", "integer", number(limit), "10"));
    arguments.push_back(defaulted("p_window_minutes", "integer", number(window), "1"));
    if (bad_inputs)
        give_bad_drop_in_arguments(random, arguments);
    // An anonymous caller is allowed before any engine is asked.
    call.memory = session.engine == "memory" && (for_user || !session.jwt.anonymous);
    compare_drop_in_keys(call, user.empty() ? std::vector<std::string>{}
                                            : std::vector<std::string>{user + ":" + name});
    call.period = window * kMinute;
    write_call(random, call, arguments, "SELECT public.");
    return call;
}

// A few users on a few names, under the names' policies (rpc.<name>) when they have one; for a
// named user, mostly the JWT's own (a JWT role may name no other).
Call rpc_check_call(Context& context, bool for_user) {
    Random& random = context.random;
    // check_rate_limit_for_user is service_role's: a JWT role is refused it.
    const std::string role = for_user ? next_drop_in_role(context, "rpc_limits", 0.5, 0.45)
                                      : next_drop_in_role(context, "rpc_limits", 0.3, 0.15);
    const std::string name = random_drop_in_name(context, kRpcNames);
    const auto [limit, window] = random_drop_in_limit(context, "rpc." + name, kMinute, kRpcWindows);
    const std::string& jwt_user = context.drop_in_sessions["rpc_limits"].jwt.user;
    const std::string user =
        !jwt_user.empty() && random.chance(0.6) ? jwt_user : random_drop_in_user(context);
    return make_rpc_call(context, for_user, role, user, name, limit, window,
                         random.chance(kBadInputs));
}

Call rpc_cleanup_call(Context& context) {
    Random& random = context.random;
    Call call = drop_in_call(context, "rpc_limits", "cleanup_rpc_rate_limits",
                             next_drop_in_role(context, "rpc_limits", 0.7, 0.25));
    std::vector<Argument> arguments = {
        defaulted("p_older_than", "interval",
                  random.pick(std::vector<std::string>{"48 hours", "0", "00:00:00.000001",
                                                       "1 minute", "1 hour", "7 days"}),
                  "48 hours")};
    if (random.chance(kBadInputs))
        give_bad_drop_in_arguments(random, arguments);
    compare_drop_in_table(call);
    write_call(random, call, arguments, "SELECT public.");
    return call;
}

// The app's own writes to rpc_rate_limits, as its code or an administrator makes them: a window
// opened before the drop-ins took over, a count set (up to where it saturates), a user's rows
// deleted.
Call rpc_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.app = "rpc_limits";
    call.function = "rpc_rate_limits";
    call.state_sql = drop_in_apps().at(call.app).key_rows;
    const std::string user = random_drop_in_user(context);
    const std::string name = random_drop_in_name(context, kRpcNames);
    compare_drop_in_keys(call, {user + ":" + name});
    const double dice = random.unit();
    if (dice < 0.15) {
        call.sql =
            "WITH gone AS (DELETE FROM public.rpc_rate_limits WHERE user_id = $1::uuid"
            " RETURNING rpc_name, call_count) SELECT * FROM gone ORDER BY rpc_name";
        call.params = {user};
        compare_drop_in_table(call);
        return call;
    }
    if (dice < 0.5) {
        call.sql =
            "UPDATE public.rpc_rate_limits SET call_count = $3::integer WHERE user_id = $1::uuid"
            " AND rpc_name = $2::text RETURNING call_count, window_start, window_expires_at";
        call.params = {
            user, name,
            random.pick(std::vector<Value>{"0", "1", "5", "9", "10", "2147483646", "2147483647"})};
        return call;
    }
    // As the app's own function opened it: at an instant near the clock, for whole minutes.
    call.sql =
        "INSERT INTO public.rpc_rate_limits AS r (user_id, rpc_name, call_count, window_start,"
        " window_expires_at) VALUES ($1::uuid, $2::text, $3::integer, $4::timestamptz,"
        " $4::timestamptz + $5::integer * interval '1 minute') ON CONFLICT (user_id, rpc_name)"
        " DO UPDATE SET call_count = EXCLUDED.call_count, window_start = EXCLUDED.window_start,"
        " window_expires_at = EXCLUDED.window_expires_at"
        " RETURNING r.call_count, r.window_start, r.window_expires_at";
    call.params = {user, name, number(random.between(1, 12)),
                   clock_text(context.clock - random.between(0, 2 * kHour)),
                   number(random.pick(kRpcWindows))};
    return call;
}

// ---- endpoint_limits: increment_rate_limit(p_user_id, p_endpoint, ...) ----------------------

const std::vector<std::string> kEndpoints = {"tasks",
                                             "assessments",
                                             "posts",
                                             "short",
                                             "huge",
                                             "\u043a\u043b\u044e\u0447 \u00e9",
                                             "a b'c\"d,{e}\\f NULL",
                                             std::string(256, 'e')};
const std::vector<std::string> kEndpointPolicyNames = {"tasks", "assessments", "posts", "short"};
const std::vector<std::int64_t> kEndpointWindows = {1,    1,    2,     10,    60,
                                                    3600, 3600, 86400, 86400, 31536000};

Call make_increment_call(Context& context, const std::string& role, const std::string& user,
                         const std::string& endpoint, std::int64_t limit, std::int64_t window,
                         std::int64_t increment, bool bad_inputs) {
    Random& random = context.random;
    Call call = drop_in_call(context, "endpoint_limits", "increment_rate_limit", role);
    std::vector<Argument> arguments = {
        required("p_user_id", "uuid", user_spelling(random, user)),
        required("p_endpoint", "text", endpoint),
        required("p_limit", "integer", number(limit)),
        required("p_window_seconds", "integer", number(window)),
        defaulted("p_increment", "integer", number(increment), "1"),
    };
    if (bad_inputs)
        give_bad_drop_in_arguments(random, arguments);
    call.memory = context.drop_in_sessions["endpoint_limits"].engine == "memory";
    compare_drop_in_keys(call, {user + ":" + endpoint});
    call.period = window * kSecond;
    write_call(random, call, arguments, "SELECT public.");
    return call;
}

// A few users' quotas on a few endpoints (under endpoint.<name> when it has a policy), in
// windows of a second to a year, spent by one call or by batches up to where the counter
// saturates; mostly by the JWT's own user (a caller with a sub may spend no other's).
Call increment_call(Context& context) {
    Random& random = context.random;
    const std::string role = next_drop_in_role(context, "endpoint_limits", 0.3, 0.2, 0.2);
    const std::string endpoint = random_drop_in_name(context, kEndpoints);
    const auto [limit, window] =
        random_drop_in_limit(context, "endpoint." + endpoint, kSecond, kEndpointWindows);
    const std::string& jwt_user = context.drop_in_sessions["endpoint_limits"].jwt.user;
    const std::string user =
        !jwt_user.empty() && random.chance(0.9) ? jwt_user : random_drop_in_user(context);
    const double dice = random.unit();
    const std::int64_t increment = dice < 0.6    ? 1
                                   : dice < 0.8  ? random.between(2, 5)
                                   : dice < 0.92 ? random.between(1, limit)
                                   : dice < 0.96 ? limit
                                   : dice < 0.98 ? 2147483000
                                                 : kMaxInteger;
    return make_increment_call(context, role, user, endpoint, limit, window, increment,
                               random.chance(kBadInputs));
}

Call endpoint_cleanup_call(Context& context) {
    Random& random = context.random;
    Call call = drop_in_call(context, "endpoint_limits", "cleanup_expired_rate_limits",
                             next_drop_in_role(context, "endpoint_limits", 0.7, 0.25));
    compare_drop_in_table(call);
    write_call(random, call, {}, "SELECT public.");
    return call;
}

// The app's own writes to rate_limits: a window as its own function opened it (aligned to a
// length of its own, which the drop-in's calls then count in while it is open), the open
// window's counter set, a key's windows deleted.
Call endpoint_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.app = "endpoint_limits";
    call.function = "rate_limits";
    call.state_sql = drop_in_apps().at(call.app).key_rows;
    const std::string user = random_drop_in_user(context);
    const std::string endpoint = random_drop_in_name(context, kEndpoints);
    compare_drop_in_keys(call, {user + ":" + endpoint});
    const double dice = random.unit();
    if (dice < 0.2) {
        call.sql =
            "WITH gone AS (DELETE FROM public.rate_limits WHERE user_id = $1::uuid"
            " AND endpoint = $2::text RETURNING window_start, counter)"
            " SELECT * FROM gone ORDER BY window_start";
        call.params = {user, endpoint};
        return call;
    }
    if (dice < 0.5) {
        call.sql =
            "UPDATE public.rate_limits SET counter = $3::integer WHERE user_id = $1::uuid"
            " AND endpoint = $2::text AND window_start <= $4::timestamptz"
            " AND expires_at > $4::timestamptz RETURNING counter, window_start, expires_at";
        call.params = {
            user, endpoint,
            random.pick(std::vector<Value>{"1", "4", "10", "49", "50", "2147483646", "2147483647"}),
            clock_text(context.clock)};
        return call;
    }
    const Micros length = random.pick(std::vector<std::int64_t>{1, 10, 60, 3600, 86400}) * kSecond;
    const Micros start = (context.clock / length - random.between(0, 1)) * length;
    call.sql =
        "INSERT INTO public.rate_limits (user_id, endpoint, counter, window_start, expires_at,"
        " created_at) VALUES ($1::uuid, $2::text, $3::integer, $4::timestamptz,"
        " $5::timestamptz, $6::timestamptz) ON CONFLICT (user_id, endpoint, window_start)"
        " DO NOTHING RETURNING counter, window_start, expires_at";
    call.params = {user,
                   endpoint,
                   number(random.chance(0.9) ? random.between(1, 12) : kMaxInteger),
                   clock_text(start),
                   clock_text(start + length),
                   clock_text(context.clock)};
    return call;
}

// ---- sliding_window_limits: check_rate_limit(p_key, ...) and check_rate_limit_tiers ---------

const std::vector<std::string> kBucketKeys = {"global",
                                              "ip:a1b2c3",
                                              "batch",
                                              "k1",
                                              "k2",
                                              "\u043a\u043b\u044e\u0447 \u00e9",
                                              "a b'c\"d,{e}\\f NULL",
                                              std::string(256, 'b')};
// A year's window is rare: its buckets stay until the cleanup finds none longer in use.
const std::vector<std::int64_t> kBucketWindows = {1, 1, 2, 5, 10, 60, 3600, 3600, 86400, 86400};

Call make_bucket_call(Context& context, const std::string& role, const std::string& key,
                      std::int64_t limit, std::int64_t window, std::int64_t cost, bool bad_inputs) {
    Random& random = context.random;
    Call call = drop_in_call(context, "sliding_window_limits", "check_rate_limit", role);
    std::vector<Argument> arguments = {
        required("p_key", "text", key),
        required("p_limit", "integer", number(limit)),
        required("p_window_seconds", "integer", number(window)),
        defaulted("p_cost", "integer", number(cost), "1"),
    };
    if (bad_inputs)
        give_bad_drop_in_arguments(random, arguments);
    call.memory = context.drop_in_sessions["sliding_window_limits"].engine == "memory";
    compare_drop_in_keys(call, {key});
    call.period = window * kSecond;
    write_call(random, call, arguments, "SELECT * FROM public.");
    return call;
}

// A few keys (one of them the tiers' "global") with a few calls in seconds to minutes, now and
// then a year; costs of none to all of the limit, one more (refused), and the most there are
// (whose buckets, summed under a longer window, pass what an integer holds).
Call bucket_check_call(Context& context) {
    Random& random = context.random;
    const std::string role = next_drop_in_role(context, "sliding_window_limits", 0.55, 0.4, 0.3);
    const std::string key = random_drop_in_name(context, kBucketKeys);
    const double dice = random.unit();
    const std::int64_t limit = dice < 0.65   ? random.between(1, 10)
                               : dice < 0.85 ? random.between(11, 100)
                               : dice < 0.95 ? kMaxInteger
                                             : random.between(1, kMaxInteger);
    const std::int64_t window = random.chance(0.01) ? 31536000 : random.pick(kBucketWindows);
    const double cost_dice = random.unit();
    std::int64_t cost = cost_dice < 0.08   ? 0
                        : cost_dice < 0.65 ? 1
                        : cost_dice < 0.8  ? std::min<std::int64_t>(random.between(2, 5), limit)
                        : cost_dice < 0.9  ? random.between(0, limit)
                        : cost_dice < 0.97 ? limit
                                           : limit + 1;
    return make_bucket_call(context, role, key, limit, window, cost, random.chance(kBadInputs));
}

const std::vector<std::string> kTierIps = {"203.0.113.7", "203.0.113.8",  " 203.0.113.7 ",
                                           "2001:db8::1", "198.51.100.1", "not an ip",
                                           "\t10.0.0.1"};
const std::vector<std::string> kTierEmails = {"alice@example.com", "bob@example.com",
                                              "Alice@Example.com", "alice@example.com ",
                                              "user1@example.com", "\u00c4lice@example.com"};

// The cleanup's three tiers on a few IPs and e-mails (spelled with spaces and capitals that
// are trimmed and folded before they are hashed), mostly at the app's limits, now and then at
// small ones so that the global and IP tiers deny too.
Call bucket_tiers_call(Context& context) {
    Random& random = context.random;
    Call call = drop_in_call(context, "sliding_window_limits", "check_rate_limit_tiers",
                             next_drop_in_role(context, "sliding_window_limits", 0.55, 0.4, 0.3));
    const std::string ip =
        random.chance(0.03) ? context.fresh_key() : random_drop_in_name(context, kTierIps);
    const std::string email =
        random.chance(0.03) ? context.fresh_key() : random_drop_in_name(context, kTierEmails);
    const auto tier = [&](const char* name, std::int64_t fallback, bool window) {
        const std::string value =
            random.chance(0.75)
                ? std::to_string(fallback)
                : std::to_string(window ? random.pick(kBucketWindows) : random.between(1, 10));
        return defaulted(name, "integer", value, std::to_string(fallback));
    };
    std::vector<Argument> arguments = {
        required("p_ip", "text", ip),        required("p_email", "text", email),
        tier("p_global_limit", 1000, false), tier("p_global_window_seconds", 60, true),
        tier("p_ip_limit", 5, false),        tier("p_ip_window_seconds", 60, true),
        tier("p_email_limit", 3, false),     tier("p_email_window_seconds", 3600, true),
    };
    if (random.chance(kBadInputs))
        give_bad_drop_in_arguments(random, arguments);
    call.memory = context.drop_in_sessions["sliding_window_limits"].engine == "memory";
    compare_drop_in_keys(call, {"global"}, {arguments[0].value}, {arguments[1].value});
    call.period = 60 * kSecond;
    write_call(random, call, arguments, "SELECT * FROM public.");
    return call;
}

Call bucket_cleanup_call(Context& context) {
    Random& random = context.random;
    Call call = drop_in_call(context, "sliding_window_limits", "cleanup_old_rate_limit_buckets",
                             next_drop_in_role(context, "sliding_window_limits", 0.7, 0.3));
    compare_drop_in_table(call);
    write_call(random, call, {}, "SELECT public.");
    return call;
}

// The app's own writes to rate_limit_buckets: a bucket of a past second as its own function
// wrote it (a count and the window it was counted under), a key's buckets deleted.
Call bucket_row_call(Context& context) {
    Random& random = context.random;
    Call call;
    call.app = "sliding_window_limits";
    call.function = "rate_limit_buckets";
    call.state_sql = drop_in_apps().at(call.app).key_rows;
    const std::string key = random_drop_in_name(context, kBucketKeys);
    compare_drop_in_keys(call, {key});
    if (random.chance(0.25)) {
        call.sql =
            "WITH gone AS (DELETE FROM public.rate_limit_buckets WHERE key = $1::text"
            " RETURNING bucket_time, count) SELECT count(*), sum(count) FROM gone";
        call.params = {key};
        return call;
    }
    const Micros second = context.clock / kSecond * kSecond;
    // Now and then the most a bucket holds, 2^31 - 1, which summed with others passes what an
    // integer holds: the count stops at 2^31 - 1 in both editions.
    const std::int64_t count = random.chance(0.95) ? random.between(1, 5) : kMaxInteger;
    call.sql =
        "INSERT INTO public.rate_limit_buckets AS b (key, bucket_time, count, window_seconds)"
        " VALUES ($1::text, $2::timestamptz, $3::integer, $4::integer)"
        " ON CONFLICT (key, bucket_time) DO UPDATE SET count = EXCLUDED.count,"
        " window_seconds = EXCLUDED.window_seconds RETURNING b.*";
    call.params = {key, clock_text(second - random.between(0, 120) * kSecond), number(count),
                   number(random.pick(kBucketWindows))};
    return call;
}

// ---- the drop-ins' policies and scenarios ---------------------------------------------------

// A period a drop-in's policy may have: its text, its length as the drop-ins read it, and
// whether it is a calendar period (fixed_window only) and one that needs a time zone.
struct DropInPeriod {
    const char* text;
    Micros length;
    bool calendar;
    bool zoned;
};

const std::vector<DropInPeriod> kDropInPeriods = {
    {"1 minute", kMinute, false, false},
    {"90 seconds", 90 * kSecond, false, false},
    {"1.7 seconds", 1700 * kMillisecond, false, false},
    {"00:00:00.003", 3 * kMillisecond, false, false},
    {"1 hour", kHour, false, false},
    {"1 day", kDay, false, false},
    {"365 days", kMaxWindow, false, false},
    {"8760 hours", kMaxWindow, false, false},
    {"1 day", kDay, true, true},
    {"1 week", 7 * kDay, true, true},
    {"7 days", 7 * kDay, true, true},
    {"1 mon", 31 * kDay, true, false},
    {"1 month", 31 * kDay, true, true},
};

// A drop-in's policy (rpc.<name>, endpoint.<name>), whose limit and period win over the
// caller's: written whole (or replacing the row of that name), its limit changed, or deleted;
// now and then a value the policy table refuses alike.
Call drop_in_policy_call(Context& context, const std::string& app, const std::string& prefix,
                         const std::vector<std::string>& names) {
    Random& random = context.random;
    Call call;
    call.app = app;
    call.function = "policies";
    const std::string name = prefix + random.pick(names);
    call.policies = {name};
    const auto written = context.drop_in_policies.find(name);
    const double dice = random.unit();
    if (dice < 0.12) {
        call.sql = "DELETE FROM ratelimit.policies WHERE name = $1::text RETURNING name";
        call.params = {name};
        context.drop_in_policies.erase(name);
        return call;
    }
    if (dice < 0.35 && written != context.drop_in_policies.end()) {
        written->second.limit = random.between(1, 12);
        call.sql =
            "UPDATE ratelimit.policies SET \"limit\" = $2::integer WHERE name = $1::text"
            " RETURNING *";
        call.params = {name, number(written->second.limit)};
        return call;
    }
    const DropInPeriod& period = random.pick(kDropInPeriods);
    const double limit_dice = random.unit();
    const std::int64_t limit = limit_dice < 0.8    ? random.between(1, 12)
                               : limit_dice < 0.95 ? random.between(13, 1000)
                                                   : kMaxInteger;
    Value limit_value = number(limit);
    Value period_value = period.text;
    Value zone = period.zoned ? Value(random.pick(std::vector<std::string>{
                                    "Europe/Berlin", "UTC", "America/New_York", "Asia/Kolkata"}))
                              : std::nullopt;
    const bool bad = random.chance(kBadInputs);
    if (bad) {
        switch (random.next() % 3) {
            case 0:
                limit_value = random.pick(bad_values("p_limit"));
                break;
            case 1:
                period_value = random.pick(
                    std::vector<Value>{std::nullopt, "0", "-1 minute", "366 days", "2 mons"});
                break;
            default:
                period_value = "1 day";
                zone = random.pick(bad_values("p_time_zone"));
                break;
        }
    }
    call.sql =
        "INSERT INTO ratelimit.policies AS p (name, algorithm, \"limit\", period, time_zone)"
        " VALUES ($1::text, $2::text, $3::integer, $4::interval, $5::text)"
        " ON CONFLICT (name) DO UPDATE SET algorithm = EXCLUDED.algorithm,"
        " \"limit\" = EXCLUDED.\"limit\", period = EXCLUDED.period,"
        " time_zone = EXCLUDED.time_zone RETURNING *";
    call.params = {name, period.calendar ? std::string("fixed_window") : random.pick(kAlgorithms),
                   limit_value, period_value, zone};
    // A refused write leaves the row as it was, which the test no longer knows.
    if (bad)
        context.drop_in_policies.erase(name);
    else
        context.drop_in_policies[name] = DropInPolicy{limit, period.length};
    return call;
}

// An RPC's window filled by a user, then called a microsecond before, at and after the instant
// it ends: it still holds at that instant, and restarts after.
Call rpc_window_edges(Context& context) {
    Random& random = context.random;
    change_drop_in_session(context, "rpc_limits");
    const std::string user = random_drop_in_user(context);
    const std::string name = "edge:" + context.fresh_key();
    const std::int64_t limit = random.between(1, 3);
    const std::int64_t window = random.between(1, 2);
    const auto make = [&](Micros move) {
        Call call = make_rpc_call(context, true, "", user, name, limit, window, false);
        call.move = move;
        return call;
    };
    std::vector<Call> calls;
    calls.push_back(make(random.between(0, kSecond)));
    for (std::int64_t i = 0; i < limit; ++i)
        calls.push_back(make(0));
    for (const Micros move : {window * kMinute - 1, Micros{1}, Micros{1}, Micros{0}})
        calls.push_back(make(move));
    return start_scenario(context, std::move(calls));
}

// An endpoint's aligned window filled just before it ends, then increments a microsecond
// before, at and after the instant the next one begins; the user the JWT's own (or no JWT).
Call endpoint_window_edges(Context& context) {
    Random& random = context.random;
    change_drop_in_session(context, "endpoint_limits");
    DropInSession& session = context.drop_in_sessions["endpoint_limits"];
    const std::string user = random_drop_in_user(context);
    session.jwt = random.chance(0.5) ? Jwt{user_claims(user), "", user, false} : Jwt{};
    // A JWT role needs a policy when ratelimit.dropin_require_policy is on; the endpoint is new.
    const std::string role =
        session.jwt.user.empty() || session.require_policy == "on" ? "" : "authenticated";
    const std::string endpoint = "edge:" + context.fresh_key();
    const std::int64_t limit = random.between(1, 3);
    const std::int64_t window = random.pick(std::vector<std::int64_t>{1, 10, 60});
    const Micros before_end =
        random.between(1, std::min<Micros>(window * kSecond - 1, kSecond / 2));
    const auto make = [&](std::int64_t increment, Micros move) {
        Call call =
            make_increment_call(context, role, user, endpoint, limit, window, increment, false);
        call.move = move;
        return call;
    };
    std::vector<Call> calls;
    Call fill = make(limit, window * kSecond - before_end);
    fill.align = window * kSecond;
    calls.push_back(std::move(fill));
    calls.push_back(make(1, 0));
    for (const Micros move : {before_end - 1, Micros{1}, Micros{1}})
        calls.push_back(make(1, move));
    return start_scenario(context, std::move(calls));
}

// A key's bucket filled within a second, then calls a microsecond before, at and after the
// instant the bucket leaves the window.
Call bucket_window_edges(Context& context) {
    Random& random = context.random;
    change_drop_in_session(context, "sliding_window_limits");
    const std::string role = random.chance(0.5) ? "" : "service_role";
    const std::string key = "edge:" + context.fresh_key();
    const std::int64_t limit = random.between(1, 3);
    const std::int64_t window = random.pick(std::vector<std::int64_t>{1, 2, 60});
    const Micros into_second = random.between(0, kSecond - 1);
    const auto make = [&](std::int64_t cost, Micros move) {
        Call call = make_bucket_call(context, role, key, limit, window, cost, false);
        call.move = move;
        return call;
    };
    std::vector<Call> calls;
    Call fill = make(limit, into_second);
    fill.align = kSecond;
    calls.push_back(std::move(fill));
    calls.push_back(make(1, 0));
    for (const Micros move : {window * kSecond - into_second - 1, Micros{1}, Micros{1}})
        calls.push_back(make(1, move));
    return start_scenario(context, std::move(calls));
}

// A drop-in called at the first or last instant the clock may read, on a name or key of its own
// (a window opened in the year 9999 would stand still for the rest of the run).
Call drop_in_clock_edge(Context& context, const std::string& app) {
    Random& random = context.random;
    change_drop_in_session(context, app);
    const std::string name = "edge:" + context.fresh_key();
    const std::int64_t limit = random.between(1, 3);
    Call call;
    if (app == "rpc_limits") {
        call = make_rpc_call(context, true, "", random_drop_in_user(context), name, limit,
                             random.pick(kRpcWindows), false);
    } else if (app == "endpoint_limits") {
        // The JWT's own user, which a caller with a sub may only name.
        const std::string& jwt_user = context.drop_in_sessions[app].jwt.user;
        call = make_increment_call(
            context, "", jwt_user.empty() ? random_drop_in_user(context) : jwt_user, name, limit,
            random.pick(kEndpointWindows), random.between(1, 2), false);
    } else {
        call = make_bucket_call(context, "service_role", name, limit, random.pick(kBucketWindows),
                                random.between(0, limit), false);
    }
    call.clock = random.pick(
        std::vector<std::string>{"1970-01-01 00:00:00+00", "1970-01-01 00:00:00.001+00",
                                 "9999-12-31 00:00:00+00", "9999-12-31 23:59:59.999999+00"});
    return call;
}

struct Generator {
    const char* name;
    int weight;
    Call (*make)(Context&);
    const char* app = nullptr;  // the app whose drop-ins it calls, in that app's databases
};

// Every area of the API the test covers, and how often it is called.
const std::vector<Generator> kGenerators = {
    {"consume", 3000, [](Context& context) { return limit_call(context, "consume", false); }},
    {"peek", 1000, [](Context& context) { return limit_call(context, "peek", false); }},
    {"refund", 600, [](Context& context) { return limit_call(context, "refund", false); }},
    {"allow", 800, [](Context& context) { return limit_call(context, "allow", false); }},
    {"consume_many and peek_many", 1000, many_call},
    {"consume_all", 1200, consume_all_call},
    {"reset", 300, reset_call},
    {"block", 300, [](Context& context) { return block_call(context, false); }},
    {"the clock's first and last instants", 30, clock_edge_call},
    // By policy: the rows written alike in both databases, and the calls that read them.
    {"policies", 60, policy_row_call},
    {"tiers", 15, tier_row_call},
    {"key_overrides", 30, override_row_call},
    {"access_list", 30, access_row_call},
    {"check", 500, [](Context& context) { return policy_check_call(context, "check"); }},
    {"check_many", 150, [](Context& context) { return policy_check_call(context, "check_many"); }},
    {"check_all", 150, [](Context& context) { return policy_check_call(context, "check_all"); }},
    {"check_http", 250, [](Context& context) { return policy_check_call(context, "check_http"); }},
    {"reset_policy_key", 50,
     [](Context& context) { return policy_key_call(context, "reset_policy_key"); }},
    {"block_policy_key", 50,
     [](Context& context) { return policy_key_call(context, "block_policy_key"); }},
    {"http_headers and http_body", 100, http_fields_call},
    // Scenarios: the weight is how often one starts; each makes several calls.
    {"long runs", 2, long_run},
    {"delay queues", 20, delay_queue},
    {"window edges", 20, window_edges},
    {"calendar windows where daylight saving turns", 10, calendar_turns},
    {"limit changes", 20, limit_changes},
    // The apps' drop-ins, each in its app's databases: about a fifth of the calls (the window
    // edges are scenarios).
    {"rpc_limits: check_rate_limit", 450,
     [](Context& context) { return rpc_check_call(context, false); }, "rpc_limits"},
    {"rpc_limits: check_rate_limit_for_user", 330,
     [](Context& context) { return rpc_check_call(context, true); }, "rpc_limits"},
    {"rpc_limits: cleanup_rpc_rate_limits", 12, rpc_cleanup_call, "rpc_limits"},
    {"rpc_limits: rpc_rate_limits", 25, rpc_row_call, "rpc_limits"},
    {"rpc_limits: policies", 40,
     [](Context& context) {
         return drop_in_policy_call(context, "rpc_limits", "rpc.", kRpcPolicyNames);
     },
     "rpc_limits"},
    {"endpoint_limits: increment_rate_limit", 750, increment_call, "endpoint_limits"},
    {"endpoint_limits: cleanup_expired_rate_limits", 12, endpoint_cleanup_call, "endpoint_limits"},
    {"endpoint_limits: rate_limits", 25, endpoint_row_call, "endpoint_limits"},
    {"endpoint_limits: policies", 40,
     [](Context& context) {
         return drop_in_policy_call(context, "endpoint_limits", "endpoint.", kEndpointPolicyNames);
     },
     "endpoint_limits"},
    {"sliding_window_limits: check_rate_limit", 500, bucket_check_call, "sliding_window_limits"},
    {"sliding_window_limits: check_rate_limit_tiers", 300, bucket_tiers_call,
     "sliding_window_limits"},
    {"sliding_window_limits: cleanup_old_rate_limit_buckets", 8, bucket_cleanup_call,
     "sliding_window_limits"},
    {"sliding_window_limits: rate_limit_buckets", 20, bucket_row_call, "sliding_window_limits"},
    {"rpc_limits: window edges", 8, rpc_window_edges, "rpc_limits"},
    {"endpoint_limits: window edges", 8, endpoint_window_edges, "endpoint_limits"},
    {"sliding_window_limits: window edges", 8, bucket_window_edges, "sliding_window_limits"},
    {"rpc_limits: the clock's first and last instants", 4,
     [](Context& context) { return drop_in_clock_edge(context, "rpc_limits"); }, "rpc_limits"},
    {"endpoint_limits: the clock's first and last instants", 4,
     [](Context& context) { return drop_in_clock_edge(context, "endpoint_limits"); },
     "endpoint_limits"},
    {"sliding_window_limits: the clock's first and last instants", 4,
     [](Context& context) { return drop_in_clock_edge(context, "sliding_window_limits"); },
     "sliding_window_limits"},
};

// A generator of the table, by weight, among those whose app's databases the run has.
const Generator& pick_generator(Random& random, const std::set<std::string>& apps) {
    const auto runs = [&](const Generator& generator) {
        return generator.app == nullptr || apps.count(generator.app) > 0;
    };
    int total = 0;
    for (const Generator& generator : kGenerators)
        total += runs(generator) ? generator.weight : 0;
    auto ticket = static_cast<int>(random.next() % static_cast<std::uint64_t>(total));
    for (const Generator& generator : kGenerators) {
        if (!runs(generator))
            continue;
        if (ticket < generator.weight)
            return generator;
        ticket -= generator.weight;
    }
    return kGenerators.front();
}

// ---- running a call on both editions ------------------------------------------------------

const char kKeyState[] =
    "SELECT 'table' AS engine, * FROM ratelimit.key_state"
    " WHERE policy = $1 AND key = ANY ($2::text[])"
    " UNION ALL SELECT 'unlogged', * FROM ratelimit.key_state_unlogged"
    " WHERE policy = $1 AND key = ANY ($2::text[]) ORDER BY engine, key";

// A policy's namespace holds its keys' counters (its name) and their penalty levels (its name,
// then /penalty). logged_at and every field of event_data come from the call and the clock, so
// the log rows agree whole; the newest few are enough to catch a wrong or missing row.
const char kPolicyState[] =
    "SELECT 'table' AS source, k::text AS state FROM ratelimit.key_state k"
    " WHERE k.policy <> '' AND split_part(k.policy, '/', 1) = ANY ($1::text[])"
    " UNION ALL SELECT 'unlogged', k::text FROM ratelimit.key_state_unlogged k"
    " WHERE k.policy <> '' AND split_part(k.policy, '/', 1) = ANY ($1::text[])"
    " UNION ALL (SELECT 'denial_log', (d.slot, d.logged_at, d.event_type, d.severity, d.source,"
    " d.status, d.error_message, d.event_data)::text FROM ratelimit.denial_log d"
    " WHERE d.event_data ->> 'policy' = ANY ($1::text[]) ORDER BY d.slot DESC LIMIT 20)"
    " ORDER BY 1, 2";

const char kWholeDenialLog[] =
    "SELECT slot, logged_at, event_type, severity, source, status, error_message, event_data"
    " FROM ratelimit.denial_log ORDER BY slot";

const char kWholeState[] =
    "SELECT 'table' AS engine, * FROM ratelimit.key_state"
    " UNION ALL SELECT 'unlogged', * FROM ratelimit.key_state_unlogged"
    " ORDER BY engine, policy, key";

// The two databases a call is made in, one of each edition: the editions alone (app ""), for
// the native and policy calls, or with one app's drop-ins; and what their sessions were last
// set to, so that a setting is sent only when it changes.
struct Editions {
    Editions(std::string app_name, const std::string& c_conninfo, const std::string& sql_conninfo)
        : app(std::move(app_name)),
          c_edition(app.empty() ? "C edition" : "C edition (" + app + ")", c_conninfo),
          sql_edition(app.empty() ? "SQL edition" : "SQL edition (" + app + ")", sql_conninfo) {}

    std::string app;
    Database c_edition;
    Database sql_edition;
    std::string clock_set;  // the test clock both sessions hold ("": not known)
    std::vector<std::pair<std::string, std::string>> settings_set;  // the drop-ins' settings
};

// What one edition did in a step.
struct Side {
    Outcome clock;       // SET ratelimit.test_clock
    Outcome settings;    // the drop-ins' settings
    Outcome role;        // SET ROLE
    Outcome reset_role;  // RESET ROLE after the call
    Outcome call;
    Outcome state;  // the state rows of the call's keys
};

struct Step {
    Side c;
    Side sql;
    std::string clock_sql;
    std::string difference;  // "" when the editions agree
};

// The statement that sets the drop-ins' settings, each for the session.
std::string settings_sql(std::size_t count) {
    std::string sql = "SELECT ";
    for (std::size_t i = 0; i < count; ++i)
        sql += (i > 0 ? ", " : "") + std::string("pg_catalog.set_config($") +
               std::to_string(2 * i + 1) + ", $" + std::to_string(2 * i + 2) + ", false)";
    return sql;
}

std::vector<Value> settings_params(const Call& call) {
    std::vector<Value> params;
    for (const auto& [name, value] : call.settings) {
        params.push_back(name);
        params.push_back(value);
    }
    return params;
}

// Runs `call` on both editions of its pair, at `clock`: the clock and the drop-ins' settings set
// (when they changed), the role taken, the call, the role given back, the state rows of its
// keys, all sent to both databases before either is read, so that the two servers work at once.
Step run_step(Editions& editions, const Call& call, const std::string& clock) {
    Step step;
    step.clock_sql = "SET ratelimit.test_clock = " + literal(clock);
    // The settings stay from the step before (each is set in a transaction of its own).
    const bool set_clock = clock != editions.clock_set;
    const bool set_settings = !call.settings.empty() && call.settings != editions.settings_set;
    const bool set_role = !call.role.empty();
    std::vector<Value> keys(call.keys.begin(), call.keys.end());
    std::vector<Value> policies(call.policies.begin(), call.policies.end());
    const bool by_policy = !call.policies.empty();
    const std::string state_sql = !call.state_sql.empty() ? call.state_sql
                                  : by_policy             ? kPolicyState
                                                          : kKeyState;
    const std::vector<Value> state_params = !call.state_sql.empty() ? call.state_params
                                            : by_policy
                                                ? std::vector<Value>{array_text(policies)}
                                                : std::vector<Value>{call.policy, array_text(keys)};
    for (Database* database : {&editions.c_edition, &editions.sql_edition}) {
        if (set_clock)
            database->send(step.clock_sql, {});
        if (set_settings)
            database->send(settings_sql(call.settings.size()), settings_params(call));
        if (set_role)
            database->send("SELECT pg_catalog.set_config('role', $1, false)", {call.role});
        database->send(call.sql, call.params);
        if (set_role)
            database->send("RESET ROLE", {});
        database->send(state_sql, state_params);
    }
    for (auto [database, side] : {std::pair<Database*, Side*>{&editions.c_edition, &step.c},
                                  std::pair<Database*, Side*>{&editions.sql_edition, &step.sql}}) {
        if (set_clock)
            side->clock = database->receive();
        if (set_settings)
            side->settings = database->receive();
        if (set_role)
            side->role = database->receive();
        side->call = database->receive();
        if (set_role)
            side->reset_role = database->receive();
        side->state = database->receive();
    }
    editions.clock_set = step.c.clock.error ? "" : clock;
    if (set_settings)
        editions.settings_set = step.c.settings.error
                                    ? std::vector<std::pair<std::string, std::string>>{}
                                    : call.settings;
    if (!step.c.clock.same(step.sql.clock)) {
        step.difference = "setting the clock";
    } else if (!step.c.settings.same(step.sql.settings)) {
        step.difference = "setting the drop-ins' settings";
    } else if (!step.c.role.same(step.sql.role) || !step.c.reset_role.same(step.sql.reset_role)) {
        step.difference = "setting the role";
    } else if (call.memory) {
        // The C edition decides; the SQL edition, which has no memory engine, must say so (or
        // refuse a bad argument as the C edition does).
        const bool refused = step.sql.call.error && step.sql.call.sqlstate == "0A000";
        if (!refused && !(step.c.call.error && step.c.call.same(step.sql.call)))
            step.difference = "the memory engine (the SQL edition must raise 0A000)";
    } else if (!step.c.call.same(step.sql.call)) {
        step.difference = "the answer";
    }
    if (step.difference.empty() && !step.c.state.same(step.sql.state))
        step.difference = "the state rows";
    return step;
}

// ---- the run ------------------------------------------------------------------------------

struct Counts {
    long calls = 0;
    long errors = 0;  // calls the C edition refused
    long denied = 0;  // answers with a denial in them
    long memory = 0;
    double seconds = 0;  // spent in its steps, both editions at once
};

// Whether an answer holds a denial: a decision, an array of them, allow's false, or a drop-in's
// (false, its allowed column false, or its jsonb's).
bool denies(const Call& call, const Outcome& answer) {
    if (answer.error || answer.rows.size() != 1 || answer.rows[0].empty() || !answer.rows[0][0])
        return false;
    const std::string& text = *answer.rows[0][0];
    if (!call.app.empty())
        return (call.policies.empty() && text == "f") ||
               text.find("\"allowed\": false") != std::string::npos;
    if (answer.rows[0].size() != 1)
        return false;
    return (call.function == "allow" && text == "f") || text.rfind("(f,", 0) == 0 ||
           (call.function == "check_http" &&
            text.find("\"allowed\": false") != std::string::npos) ||
           text.find("\"(f,") != std::string::npos;
}

// What a call is counted as: its function, or for a drop-in the app's and its function's.
std::string counted_as(const Call& call) {
    return call.app.empty() ? call.function : call.app + ": " + call.function;
}

// How a drop-in call's session differs from the connection's, for reading.
std::string session_text(const Call& call) {
    std::string text;
    for (const auto& [name, value] : call.settings)
        text += (text.empty() ? "" : ", ") + name + " = " + literal(value, 120);
    if (!call.role.empty())
        text += (text.empty() ? "" : ", ") + std::string("role = ") + call.role;
    return text;
}

// A step, kept a while so that a difference can be shown with the calls on its keys before it.
struct Record {
    long step = 0;
    std::string clock;
    std::string app;
    std::string sql;
    std::vector<std::string> keys;
    std::string answer;  // the C edition's
};

std::string indented(const std::string& text, const std::string& indent) {
    std::string result = indent;
    for (const char c : text) {
        result += c;
        if (c == '\n')
            result += indent;
    }
    return result;
}

void report_difference(long number, std::uint64_t seed, const Call& call, const Step& step,
                       const std::deque<Record>& history) {
    std::cout << "\ndifferential: the editions differ in " << step.difference << " at step "
              << number << " (seed " << seed << ")\n";
    if (!call.app.empty())
        std::cout << "  databases: " << call.app << "'s (ratelimit_" << call.app
                  << ", ratelimit_sql_" << call.app << ")\n";
    std::cout << "  clock: " << step.clock_sql << "\n";
    if (!call.app.empty() && !call.settings.empty())
        std::cout << "  session: " << session_text(call) << "\n";
    std::cout << "  call:  " << call.sql << "\n";
    for (std::size_t i = 0; i < call.params.size(); ++i)
        std::cout << "         $" << i + 1 << " = " << literal(call.params[i]) << "\n";
    std::cout << "  as SQL: " << inline_sql(call) << ";\n";
    for (const auto& [label, side] :
         {std::pair<const char*, const Side*>{"C edition", &step.c},
          std::pair<const char*, const Side*>{"SQL edition", &step.sql}}) {
        std::cout << "  " << label << ":\n";
        for (const auto& [what, outcome] :
             {std::pair<const char*, const Outcome*>{"clock", &side->clock},
              {"settings", &side->settings},
              {"role", &side->role},
              {"RESET ROLE", &side->reset_role}}) {
            if (outcome->error)
                std::cout << "    " << what << ": " << outcome->text() << "\n";
        }
        std::cout << "    answer: " << side->call.text("            ") << "\n";
        if (!side->call.details.empty())
            std::cout << "            (" << side->call.details << ")\n";
        std::string columns;
        for (const std::string& column : side->state.columns)
            columns += (columns.empty() ? "" : " | ") + column;
        std::cout << "    state rows (" << columns << "):\n"
                  << indented(side->state.text(), "      ") << "\n";
    }
    const std::set<std::string> keys(call.keys.begin(), call.keys.end());
    std::vector<const Record*> earlier;
    for (auto record = history.rbegin(); record != history.rend() && earlier.size() < 12;
         ++record) {
        if (record->app == call.app &&
            std::any_of(record->keys.begin(), record->keys.end(),
                        [&](const std::string& key) { return keys.count(key) > 0; }))
            earlier.push_back(&*record);
    }
    if (!earlier.empty()) {
        std::cout << "  the last calls on these keys before it (the C edition's answers):\n";
        for (auto record = earlier.rbegin(); record != earlier.rend(); ++record)
            std::cout << "    step " << (*record)->step << ", clock " << (*record)->clock << ": "
                      << (*record)->sql << ";  -> " << (*record)->answer << "\n";
    }
    std::cout << "  replay: DIFFERENTIAL_SEED=" << seed << " DIFFERENTIAL_STEPS=" << number
              << " bash test/sql_edition/differential.sh\n";
}

// Every state row on both editions; the rows only one of them holds, or "" when they agree.
std::string whole_state_difference(Editions& editions, const std::string& query) {
    editions.c_edition.send(query, {});
    editions.sql_edition.send(query, {});
    const Outcome c_rows = editions.c_edition.receive();
    const Outcome sql_rows = editions.sql_edition.receive();
    if (c_rows.same(sql_rows))
        return "";
    if (c_rows.error || sql_rows.error)
        return "C edition: " + c_rows.text() + "\n  SQL edition: " + sql_rows.text();
    const std::set<Row> c_set(c_rows.rows.begin(), c_rows.rows.end());
    const std::set<Row> sql_set(sql_rows.rows.begin(), sql_rows.rows.end());
    std::string text;
    for (const auto& [label, mine, theirs] :
         {std::tuple<const char*, const std::set<Row>*, const std::set<Row>*>{
              "only in the C edition", &c_set, &sql_set},
          {"only in the SQL edition", &sql_set, &c_set}}) {
        Outcome only;
        for (const Row& row : *mine) {
            if (theirs->count(row) == 0 && only.rows.size() < 20)
                only.rows.push_back(row);
        }
        text += std::string("  ") + label + ":\n" + indented(only.text(), "    ") + "\n";
    }
    return text;
}

long setting(const char* name, long fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0')
        return fallback;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 0)
        throw std::runtime_error(std::string(name) + " must be a whole number, got \"" + text +
                                 "\"");
    return value;
}

std::uint64_t seed_setting() {
    const char* text = std::getenv("DIFFERENTIAL_SEED");
    if (text == nullptr || *text == '\0') {
        std::random_device device;
        return (static_cast<std::uint64_t>(device()) << 32 ^ device()) % 10000000000000000000ULL;
    }
    char* end = nullptr;
    const std::uint64_t seed = std::strtoull(text, &end, 10);
    if (*end != '\0')
        throw std::runtime_error(std::string("DIFFERENTIAL_SEED must be a whole number, got \"") +
                                 text + "\"");
    return seed;
}

// The session both editions of a pair decide in; the server, the editions (and the app's
// drop-ins) and the clock checked before anything is compared.
void prepare(Editions& editions) {
    Database& c_edition = editions.c_edition;
    Database& sql_edition = editions.sql_edition;
    for (Database* database : {&c_edition, &sql_edition}) {
        database->checked("SET TimeZone = 'UTC'");
        database->checked("SET DateStyle = 'ISO, YMD'");
        database->checked("SET IntervalStyle = 'postgres'");
        database->checked("SET application_name = 'ratelimit differential test'");
    }
    const std::string sql_edition_installed =
        "SELECT pg_catalog.to_regclass('ratelimit.sql_edition') IS NOT NULL";
    if (c_edition.checked(sql_edition_installed).rows.at(0).at(0) != Value("f") ||
        c_edition
                .checked("SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = "
                         "'ratelimit'")
                .rows.at(0)
                .at(0) != Value("1"))
        throw std::runtime_error(c_edition.label() +
                                 ": the database must have the C edition (CREATE EXTENSION "
                                 "ratelimit), and not the SQL edition");
    if (sql_edition.checked(sql_edition_installed).rows.at(0).at(0) != Value("t"))
        throw std::runtime_error(sql_edition.label() +
                                 ": the database must have the SQL edition (ratelimit_sql)");
    std::string app_table;
    if (!editions.app.empty()) {
        const auto app = drop_in_apps().find(editions.app);
        if (app == drop_in_apps().end())
            throw std::runtime_error("no app " + editions.app +
                                     " (rpc_limits, endpoint_limits or sliding_window_limits)");
        app_table = "public." + app->second.table;
        if (c_edition
                .checked("SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = $1",
                         {"ratelimit_" + editions.app})
                .rows.at(0)
                .at(0) != Value("1"))
            throw std::runtime_error(c_edition.label() + ": the database must have ratelimit_" +
                                     editions.app);
        if (sql_edition.checked("SELECT pg_catalog.to_regclass($1) IS NOT NULL", {app_table})
                .rows.at(0)
                .at(0) != Value("t"))
            throw std::runtime_error(sql_edition.label() +
                                     ": the database must have ratelimit_sql_" + editions.app +
                                     " (its plain file)");
    }
    const std::string clock = clock_text(kClockStart);
    for (Database* database : {&c_edition, &sql_edition}) {
        database->checked("SET ratelimit.test_clock = " + literal(clock));
        if (database->checked("SELECT ratelimit.clock_now() = $1::timestamptz", {clock})
                .rows.at(0)
                .at(0) != Value("t"))
            throw std::runtime_error(
                database->label() +
                ": ratelimit.clock_now() does not read ratelimit.test_clock (the SQL edition "
                "reads it once its owner has run SELECT ratelimit.use_test_clock(true))");
        database->checked("TRUNCATE ratelimit.key_state, ratelimit.key_state_unlogged");
        if (!app_table.empty()) {
            database->checked("TRUNCATE " + app_table);
            continue;
        }
        // The pool's policies and tiers exist from the start (policy_row_call and tier_row_call
        // change and delete them), so that most policy calls decide rather than fail.
        database->checked(
            "INSERT INTO ratelimit.policies (name, algorithm, \"limit\", period)"
            " SELECT name, algorithm, 5, '1 day' FROM unnest($1::text[], $2::text[])"
            " AS pool (name, algorithm) ON CONFLICT DO NOTHING",
            {array_text(std::vector<Value>(kPolicyNames.begin(), kPolicyNames.end())),
             array_text(std::vector<Value>(kAlgorithms.begin(), kAlgorithms.end()))});
        database->checked(
            "INSERT INTO ratelimit.tiers (name, multiplier) SELECT name, 2"
            " FROM unnest($1::text[]) AS name ON CONFLICT DO NOTHING",
            {array_text(std::vector<Value>(kTierNames.begin(), kTierNames.end()))});
    }
    editions.clock_set = clock;
}

Midnights local_midnights(Database& database) {
    std::vector<Value> zones(kMidnightZones.begin(), kMidnightZones.end());
    const Outcome outcome = database.checked(
        "SELECT zone, (extract(epoch FROM start) * 1000000)::bigint,"
        " (extract(epoch FROM finish) * 1000000)::bigint, finish - start <> interval '24 hours'"
        " FROM (SELECT zone, day::timestamp AT TIME ZONE zone AS start,"
        " (day + interval '1 day')::timestamp AT TIME ZONE zone AS finish"
        " FROM unnest($1::text[]) AS zone,"
        " generate_series(date '2026-01-01', date '2031-01-01', interval '1 day') AS day) AS days",
        {array_text(zones)});
    Midnights midnights;
    for (const Row& row : outcome.rows) {
        const Micros start = std::stoll(row.at(1).value());
        midnights.all.push_back(start);
        if (row.at(3) == Value("t")) {
            std::vector<Micros>& turning = midnights.turning[row.at(0).value()];
            turning.push_back(start);
            turning.push_back(std::stoll(row.at(2).value()));
        }
    }
    for (std::vector<Micros>* instants : {&midnights.all}) {
        std::sort(instants->begin(), instants->end());
        instants->erase(std::unique(instants->begin(), instants->end()), instants->end());
    }
    for (auto& [zone, instants] : midnights.turning) {
        std::sort(instants.begin(), instants.end());
        instants.erase(std::unique(instants.begin(), instants.end()), instants.end());
    }
    return midnights;
}

// The databases of a run: by app ("": the editions alone).
using Pairs = std::map<std::string, std::unique_ptr<Editions>>;

// The whole state tables, the denial log and (for an app) the app's table of every pair; the
// rows only one edition holds, or "" when they agree.
std::string whole_difference(Pairs& pairs) {
    for (auto& [app, editions] : pairs) {
        std::vector<std::string> queries = {kWholeState, kWholeDenialLog};
        if (!app.empty())
            queries.push_back(drop_in_apps().at(app).whole_table);
        for (const std::string& query : queries) {
            const std::string difference = whole_state_difference(*editions, query);
            if (!difference.empty())
                return "  in " +
                       (app.empty() ? std::string("the editions' own databases")
                                    : app + "'s databases") +
                       ": " + query + "\n" + difference;
        }
    }
    return "";
}

int run(const std::vector<std::string>& arguments) {
    const long steps = setting("DIFFERENTIAL_STEPS", 100000);
    const std::uint64_t seed = seed_setting();
    std::cout << "differential: " << steps << " steps, seed " << seed
              << " (DIFFERENTIAL_SEED=" << seed << " replays this run)" << std::endl;
    Pairs pairs;
    std::set<std::string> apps;
    pairs[""] = std::make_unique<Editions>("", arguments.at(0), arguments.at(1));
    for (std::size_t i = 2; i < arguments.size(); i += 3) {
        const std::string& app = arguments[i];
        if (i + 2 >= arguments.size() || pairs.count(app) > 0)
            throw std::runtime_error("each APP is given once, with its two conninfos: " + app);
        pairs[app] = std::make_unique<Editions>(app, arguments[i + 1], arguments[i + 2]);
        apps.insert(app);
    }
    for (auto& [app, editions] : pairs)
        prepare(*editions);
    Context context(seed, local_midnights(pairs.at("")->c_edition));

    std::map<std::string, Counts> counts;
    std::deque<Record> history;
    const auto started = std::chrono::steady_clock::now();
    for (long number = 1; number <= steps; ++number) {
        Call call;
        if (context.queued.empty()) {
            call = pick_generator(context.random, apps).make(context);
        } else {
            call = std::move(context.queued.front());
            context.queued.pop_front();
        }
        context.move_clock(call);
        const std::string clock = call.clock.empty() ? clock_text(context.clock) : call.clock;
        Step step;
        const auto step_started = std::chrono::steady_clock::now();
        try {
            step = run_step(*pairs.at(call.app), call, clock);
        } catch (const std::exception& error) {
            std::cout << "\ndifferential: step " << number << " (seed " << seed
                      << ") failed: " << error.what() << "\n  clock: " << clock
                      << "\n  as SQL: " << inline_sql(call) << ";\n";
            return 1;
        }
        Counts& count = counts[counted_as(call)];
        count.seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - step_started).count();
        ++count.calls;
        count.errors += step.c.call.error ? 1 : 0;
        count.denied += denies(call, step.c.call) ? 1 : 0;
        count.memory += call.memory ? 1 : 0;
        if (!step.difference.empty()) {
            report_difference(number, seed, call, step, history);
            return 1;
        }
        std::string answer = step.c.call.text();
        if (answer.size() > 200)
            answer = answer.substr(0, 200) + "...";
        std::string sql = inline_sql(call, 80);
        if (!call.role.empty())
            sql += " -- as " + call.role;
        history.push_back(Record{number, clock, call.app, sql, call.keys, answer});
        if (history.size() > 2000)
            history.pop_front();
        if (number % kWholeStateEvery == 0 || number == steps) {
            const std::string difference = whole_difference(pairs);
            if (!difference.empty()) {
                std::cout << "\ndifferential: the editions' state tables, apps' tables or denial "
                             "logs differ after step "
                          << number << " (seed " << seed << ")\n"
                          << difference << "  replay: DIFFERENTIAL_SEED=" << seed
                          << " DIFFERENTIAL_STEPS=" << number
                          << " bash test/sql_edition/differential.sh\n";
                return 1;
            }
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    Counts total;
    int width = 14;
    for (const auto& [function, count] : counts)
        width = std::max(width, static_cast<int>(function.size()));
    std::printf("differential: %ld steps in %.1f s, the editions agree\n", steps, seconds);
    std::printf("  %-*s %8s %8s %8s %8s %9s\n", width, "function", "calls", "errors", "denials",
                "memory", "seconds");
    for (const auto& [function, count] : counts) {
        std::printf("  %-*s %8ld %8ld %8ld %8ld %9.1f\n", width, function.c_str(), count.calls,
                    count.errors, count.denied, count.memory, count.seconds);
        total.seconds += count.seconds;
        total.calls += count.calls;
        total.errors += count.errors;
        total.denied += count.denied;
        total.memory += count.memory;
    }
    std::printf("  %-*s %8ld %8ld %8ld %8ld %9.1f\n", width, "all", total.calls, total.errors,
                total.denied, total.memory, total.seconds);
    std::printf("  %ld of %ld calls raised an error (errors: the C edition's); seed %llu\n",
                total.errors, total.calls, static_cast<unsigned long long>(seed));
    return 0;
}

}  // namespace
}  // namespace ratelimit_test

int main(int argc, char** argv) {
    if (argc < 3 || (argc - 3) % 3 != 0) {
        std::cerr << "usage: differential_test C_EDITION_CONNINFO SQL_EDITION_CONNINFO"
                     " [APP C_CONNINFO SQL_CONNINFO]...\n"
                     "  APP: rpc_limits, endpoint_limits or sliding_window_limits\n"
                     "  DIFFERENTIAL_STEPS (100000), DIFFERENTIAL_SEED (random; printed)\n";
        return 2;
    }
    try {
        return ratelimit_test::run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const std::exception& error) {
        std::cerr << "differential: " << error.what() << "\n";
        return 2;
    }
}
