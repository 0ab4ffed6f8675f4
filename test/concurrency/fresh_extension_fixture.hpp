// Base fixture: every test starts from a freshly created extension and its three drop-in
// extensions (empty counters, no state left over from an earlier test) and keeps a setup
// connection for checking the tables. The per-RPC and endpoint drop-ins are in public, the
// sliding window's in the schema sliding_window: its check_rate_limit shares the per-RPC one's
// name, so the two apps' drop-ins cannot share a schema (tests qualify sliding_window.*).
//
// With RATELIMIT_EDITION=sql the database holds the SQL edition from its plain file
// (test/sql_edition/install.sh installs it), which is no extension to drop and create again: each
// test starts from its state tables emptied instead, its clock switched to the test clock the
// tests set, and the apps' drop-ins' tables emptied where install.sh installed them beside it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pg_connection.hpp"

namespace ratelimit_test {

class FreshExtensionTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(setup_.connected()) << setup_.error_message();
        if (sql_edition()) {
            setup_.query("TRUNCATE ratelimit.key_state, ratelimit.key_state_unlogged");
            // The apps' drop-ins, where install.sh installed them beside it.
            setup_.query(
                "DO $$ DECLARE t regclass; BEGIN FOREACH t IN ARRAY "
                "ARRAY[to_regclass('public.rpc_rate_limits'),"
                " to_regclass('public.rate_limits'), "
                "to_regclass('sliding_window.rate_limit_buckets')] LOOP"
                " IF t IS NOT NULL THEN EXECUTE format('TRUNCATE %s', t); END IF; END LOOP; END "
                "$$");
            setup_.query("SELECT ratelimit.use_test_clock(true)");
            return;
        }
        // CASCADE drops the drop-in extensions too; the (then empty) schema stays.
        setup_.query("DROP EXTENSION IF EXISTS ratelimit CASCADE");
        setup_.query("CREATE EXTENSION ratelimit");
        setup_.query("CREATE EXTENSION ratelimit_rpc_limits");
        setup_.query("CREATE EXTENSION ratelimit_endpoint_limits");
        setup_.query("CREATE SCHEMA IF NOT EXISTS sliding_window");
        setup_.query("CREATE EXTENSION ratelimit_sliding_window_limits SCHEMA sliding_window");
    }

    static bool sql_edition() {
        const char* edition = std::getenv("RATELIMIT_EDITION");
        return edition != nullptr && std::string(edition) == "sql";
    }

    // The setup connection is a superuser: it reads the drop-ins' tables despite row level
    // security.
    std::string scalar(const std::string& sql) { return setup_.query(sql).single_value(); }
    std::string scalar(const std::string& sql, const std::vector<const char*>& params) {
        return setup_.query_params(sql, params).single_value();
    }

    PgConnection setup_;
};

}  // namespace ratelimit_test
