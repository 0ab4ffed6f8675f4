#include "ratelimit/identity.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

constexpr char kUuid[] = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";

Uuid expected_uuid() {
    return Uuid{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
                0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11};
}

TEST(ParseUuid, CanonicalBareAndUpperCase) {
    EXPECT_EQ(parse_uuid(kUuid), expected_uuid());
    EXPECT_EQ(parse_uuid("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), expected_uuid());
    EXPECT_EQ(parse_uuid("a0eebc999c0b4ef8bb6d6bb9bd380a11"), expected_uuid());
}

TEST(ParseUuid, RejectsEverythingElse) {
    EXPECT_FALSE(parse_uuid(""));
    EXPECT_FALSE(parse_uuid("not-a-uuid"));
    EXPECT_FALSE(parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"));    // short
    EXPECT_FALSE(parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111"));  // long
    EXPECT_FALSE(parse_uuid("a0eebc99x9c0b-4ef8-bb6d-6bb9bd380a11"));   // bad separator
    EXPECT_FALSE(parse_uuid("g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));   // bad digit
    EXPECT_FALSE(parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1'"));   // quote
}

TEST(FindTopLevelMember, FindsStringNullAndOtherValues) {
    auto m = find_top_level_member(R"({"role":"authenticated","sub":"abc"})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, JsonMember::Kind::kString);
    EXPECT_EQ(m->text, "abc");

    m = find_top_level_member(R"({"sub":null})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, JsonMember::Kind::kNull);

    m = find_top_level_member(R"({"sub":12.5e3})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, JsonMember::Kind::kOtherValue);

    m = find_top_level_member(R"({"role":"anon"})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, JsonMember::Kind::kAbsent);
}

TEST(FindTopLevelMember, IgnoresNestedMembersAndKeepsTheLastDuplicate) {
    auto m = find_top_level_member(
        R"({"app_metadata":{"sub":"nested"},"sub":"first","x":[1,{"sub":2}],"sub":"last"})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->text, "last");
}

TEST(FindTopLevelMember, DecodesEscapes) {
    auto m = find_top_level_member(R"({"s\u0075b":"a\"b\\c\/d\u00e9\ud83d\ude00"})", "sub");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->text, "a\"b\\c/d\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(FindTopLevelMember, RejectsInvalidJson) {
    const char* invalid[] = {
        "",
        "[]",
        "\"sub\"",
        "{",
        R"({"sub":"x")",
        R"({"sub":"x"} trailing)",
        R"({"sub" "x"})",
        R"({"sub":"x",})",
        R"({sub:"x"})",
        R"({"sub":'x'})",
        R"({"sub":01})",
        R"({"sub":"\x"})",
        R"({"sub":"\u0000"})",
        R"({"sub":"\ud800"})",
        "{\"sub\":\"tab\there\"}",
        R"({"a":tru})",
        R"({"a":-})",
    };
    for (const char* text : invalid) {
        EXPECT_FALSE(find_top_level_member(text, "sub")) << text;
    }
}

TEST(FindTopLevelMember, BoundsNestingDepth) {
    std::string deep = "{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
    EXPECT_FALSE(find_top_level_member(deep, "sub"));
    std::string shallow = "{\"a\":" + std::string(50, '[') + std::string(50, ']') + "}";
    EXPECT_TRUE(find_top_level_member(shallow, "sub"));
}

TEST(ResolveCaller, NoSettingsMeansAnonymous) {
    EXPECT_FALSE(resolve_caller(nullptr, nullptr));
    EXPECT_FALSE(resolve_caller("", ""));
    EXPECT_FALSE(resolve_caller(nullptr, R"({"role":"anon"})"));
    EXPECT_FALSE(resolve_caller(nullptr, R"({"sub":null})"));
}

TEST(ResolveCaller, ClaimSubComesFirstThenClaims) {
    std::string claims = std::string(R"({"sub":")") + kUuid + "\"}";
    EXPECT_EQ(resolve_caller(nullptr, claims.c_str()), expected_uuid());
    EXPECT_EQ(resolve_caller(kUuid, R"({"sub":"00000000-0000-0000-0000-000000000000"})"),
              expected_uuid());
    // An empty claim.sub falls through to claims, as auth.uid()'s nullif does.
    EXPECT_EQ(resolve_caller("", claims.c_str()), expected_uuid());
}

TEST(ResolveCaller, MalformedIdentityIsAnErrorNamingTheSetting) {
    try {
        resolve_caller("not-a-uuid", nullptr);
        FAIL() << "expected an ArgumentError";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "request.jwt.claim.sub");
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
    for (const char* claims : {R"({"sub":"nope"})", R"({"sub":""})", R"({"sub":42})",
                               R"({"sub":["x"]})", "{not json", "[1]"}) {
        try {
            resolve_caller(nullptr, claims);
            FAIL() << "expected an ArgumentError for " << claims;
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), "request.jwt.claims") << claims;
        }
    }
}

}  // namespace
}  // namespace ratelimit
