#include "ratelimit/identity.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>

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

SubClaim sub_claim(SubClaim::Kind kind, std::string text = "") {
    SubClaim claim;
    claim.kind = kind;
    claim.text = std::move(text);
    return claim;
}

TEST(ResolveCaller, NoSettingsMeansAnonymous) {
    EXPECT_FALSE(resolve_caller(nullptr, std::nullopt));
    EXPECT_FALSE(resolve_caller("", std::nullopt));
    EXPECT_FALSE(resolve_caller(nullptr, sub_claim(SubClaim::Kind::kAbsent)));
    EXPECT_FALSE(resolve_caller(nullptr, sub_claim(SubClaim::Kind::kNull)));
}

TEST(ResolveCaller, ClaimSubComesFirstThenClaims) {
    const SubClaim claims = sub_claim(SubClaim::Kind::kString, kUuid);
    EXPECT_EQ(resolve_caller(nullptr, claims), expected_uuid());
    EXPECT_EQ(resolve_caller(kUuid, sub_claim(SubClaim::Kind::kString,
                                              "00000000-0000-0000-0000-000000000000")),
              expected_uuid());
    // An empty claim.sub falls through to claims, as auth.uid()'s nullif does.
    EXPECT_EQ(resolve_caller("", claims), expected_uuid());
}

// The subject as text: every identity provider's form is a subject; only a uuid column or
// parameter asks for a UUID.
TEST(ResolveSubject, EveryProvidersSubIsASubject) {
    const char* const subs[] = {
        kUuid,                                  // Supabase
        "auth0|5f1c6d1e2a3b4c5d6e7f8091",       // Auth0
        "google-oauth2|104729837465019283746",  // Auth0, social
        "user_2NNEqL2nrIRdJ194ndJqAHwEfxC",     // Clerk
        "kD9c7xYz2bQeRtUv4WpLmN8sHjA1",         // Firebase
        "us-east-1:7c5a1f9e-3b2d-4e6f-8a9b-0c1d2e3f4a5b",
    };
    for (const char* sub : subs) {
        const std::optional<Subject> from_claims =
            resolve_subject(nullptr, sub_claim(SubClaim::Kind::kString, sub));
        ASSERT_TRUE(from_claims) << sub;
        EXPECT_EQ(from_claims->text, sub);
        EXPECT_STREQ(from_claims->setting, "request.jwt.claims");
        const std::optional<Subject> from_setting = resolve_subject(sub, std::nullopt);
        ASSERT_TRUE(from_setting) << sub;
        EXPECT_EQ(from_setting->text, sub);
    }
    EXPECT_FALSE(resolve_subject(nullptr, sub_claim(SubClaim::Kind::kNull)));
    EXPECT_FALSE(resolve_subject("", std::nullopt));
    EXPECT_EQ(subject_uuid(resolve_subject(nullptr, sub_claim(SubClaim::Kind::kString, kUuid))),
              expected_uuid());
    try {
        subject_uuid(resolve_subject(nullptr, sub_claim(SubClaim::Kind::kString, "auth0|5f1c")));
        FAIL() << "a non-UUID sub was read as a uuid";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "request.jwt.claims");
        EXPECT_STREQ(e.what(), "request.jwt.claims has a \"sub\" claim that is not a UUID");
    }
    // Malformed claims are errors as text too: never anonymous.
    for (const SubClaim& claims :
         {sub_claim(SubClaim::Kind::kString, ""), sub_claim(SubClaim::Kind::kOtherValue),
          sub_claim(SubClaim::Kind::kNotAnObject)}) {
        EXPECT_THROW(resolve_subject(nullptr, claims), ArgumentError);
    }
}

TEST(ResolveCaller, MalformedIdentityIsAnErrorNamingTheSetting) {
    try {
        resolve_caller("not-a-uuid", std::nullopt);
        FAIL() << "expected an ArgumentError";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "request.jwt.claim.sub");
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
    const SubClaim malformed[] = {
        sub_claim(SubClaim::Kind::kString, "nope"), sub_claim(SubClaim::Kind::kString, ""),
        sub_claim(SubClaim::Kind::kOtherValue), sub_claim(SubClaim::Kind::kNotAnObject)};
    for (const SubClaim& claims : malformed) {
        try {
            resolve_caller(nullptr, claims);
            FAIL() << "expected an ArgumentError for \"" << claims.text << "\"";
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), "request.jwt.claims") << claims.text;
        }
    }
}

TEST(RequireMayActOn, ASubNamesOnlyItsOwnId) {
    Uuid other = expected_uuid();
    other[15] ^= 1;
    for (bool jwt_role : {false, true}) {
        UserIdCaller caller{jwt_role, expected_uuid()};
        EXPECT_NO_THROW(require_may_act_on("p_user_id", caller, expected_uuid()));
        try {
            require_may_act_on("p_user_id", caller, other);
            ADD_FAILURE() << "another user's id was accepted";
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kNotAllowed);
            EXPECT_EQ(std::string(e.what()), "p_user_id must be the caller's own id (the JWT sub)");
        }
    }
}

TEST(RequireMayActOn, AJwtRoleWithoutSubNamesNoId) {
    try {
        require_may_act_on("p_user_id", UserIdCaller{true, std::nullopt}, expected_uuid());
        ADD_FAILURE() << "a JWT role without sub was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kNotAllowed);
        EXPECT_EQ(e.argument(), "p_user_id");
        EXPECT_EQ(std::string(e.what()),
                  "p_user_id needs a JWT sub claim: a request without one cannot act on a "
                  "user's id");
    }
    // Trusted roles without a sub (service_role, server code) name any user.
    EXPECT_NO_THROW(
        require_may_act_on("p_user_id", UserIdCaller{false, std::nullopt}, expected_uuid()));
}

}  // namespace
}  // namespace ratelimit
