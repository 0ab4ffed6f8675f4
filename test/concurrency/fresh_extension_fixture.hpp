// Base fixture: every test starts from a freshly created extension (empty counters, no state
// left over from an earlier test) and keeps a setup connection for checking the table.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pg_connection.hpp"

namespace ratelimit_test {

class FreshExtensionTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(setup_.connected()) << setup_.error_message();
        setup_.query("DROP EXTENSION IF EXISTS ratelimit CASCADE");
        setup_.query("CREATE EXTENSION ratelimit");
    }

    // The setup connection is a superuser: it reads rpc_rate_limits despite row level security.
    std::string scalar(const std::string& sql) { return setup_.query(sql).single_value(); }
    std::string scalar(const std::string& sql, const std::vector<const char*>& params) {
        return setup_.query_params(sql, params).single_value();
    }

    PgConnection setup_;
};

}  // namespace ratelimit_test
