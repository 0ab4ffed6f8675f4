// The size of JSON strings, as the denial log's queue fits an event into its entries.
#include "ratelimit/json_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ratelimit {
namespace {

TEST(JsonText, CountsEscapesAsJsonbWritesThem) {
    EXPECT_EQ(json_string_bytes("user:42"), 7u);
    EXPECT_EQ(json_string_bytes("a\"b\\c"), 7u);
    EXPECT_EQ(json_string_bytes("\n\t"), 4u);
    EXPECT_EQ(json_string_bytes(std::string("\x01\x1f", 2)), 12u);
    EXPECT_EQ(json_string_bytes("\xc3\xa9"), 2u);  // é: UTF-8 bytes as they are
}

TEST(JsonText, APrefixFitsAndCutsNoCharacter) {
    const std::string controls(256, '\x01');
    EXPECT_EQ(json_string_prefix(controls, 1000).size(), 166u);
    EXPECT_LE(json_string_bytes(json_string_prefix(controls, 1000)), 1000u);
    EXPECT_EQ(json_string_prefix("abc", 10), "abc");
    EXPECT_EQ(json_string_prefix("abc", 2), "ab");
    EXPECT_EQ(json_string_prefix("a\xc3\xa9z", 2), "a");  // é is not cut in two
    EXPECT_EQ(json_string_prefix("a\xc3\xa9z", 3), "a\xc3\xa9");
    EXPECT_EQ(json_string_prefix("\"x", 1), "");
}

}  // namespace
}  // namespace ratelimit
