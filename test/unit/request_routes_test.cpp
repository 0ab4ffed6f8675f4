#include "ratelimit/request_routes.hpp"

#include <gtest/gtest.h>

#include "ratelimit/error.hpp"

namespace ratelimit {
namespace {

TEST(RequestRoutes, PathPatternsMatchWholePathsWithStarsForAnyRun) {
    EXPECT_TRUE(path_matches("/items", "/items"));
    EXPECT_FALSE(path_matches("/items", "/items/1"));
    EXPECT_FALSE(path_matches("/items", "/item"));
    EXPECT_TRUE(path_matches("/items*", "/items"));
    EXPECT_TRUE(path_matches("/items*", "/items/1/children"));
    EXPECT_TRUE(path_matches("*", "/anything"));
    EXPECT_TRUE(path_matches("/rpc/*", "/rpc/login"));
    EXPECT_FALSE(path_matches("/rpc/*", "/rpc"));
    EXPECT_TRUE(path_matches("/*/comments", "/posts/7/comments"));
    EXPECT_FALSE(path_matches("/*/comments", "/posts/7/comments/1"));
    EXPECT_TRUE(path_matches("/a*b*c", "/aXbYbZc"));
    EXPECT_FALSE(path_matches("/a*b*c", "/aXbYbZ"));
    EXPECT_TRUE(path_matches("", ""));
    EXPECT_FALSE(path_matches("", "/"));
    // Only '*' is special: '?', '%', '_' and '.' stand for themselves.
    EXPECT_FALSE(path_matches("/item?", "/items"));
    EXPECT_FALSE(path_matches("/items_%", "/itemsXY"));
    EXPECT_TRUE(path_matches("/items_%", "/items_%"));
}

TEST(RequestRoutes, TheClientIsTheHopTheTrustedProxiesAdded) {
    // One proxy that appends: the rightmost hop, whatever the client wrote before it.
    EXPECT_EQ(forwarded_hop("198.51.100.1, 203.0.113.7", 1), "203.0.113.7");
    EXPECT_EQ(forwarded_hop("203.0.113.7", 1), "203.0.113.7");
    EXPECT_EQ(forwarded_hop("  2001:db8::1  ", 1), "2001:db8::1");
    // Two (a CDN, then the proxy nearest PostgREST): the second from the right.
    EXPECT_EQ(forwarded_hop("198.51.100.1, 203.0.113.7, 10.0.0.1", 2), "203.0.113.7");
    EXPECT_EQ(forwarded_hop("203.0.113.7,10.0.0.1", 2), "203.0.113.7");
    // Fewer hops than trusted proxies: the request did not pass them all, no address.
    EXPECT_EQ(forwarded_hop("203.0.113.7", 2), "");
    EXPECT_EQ(forwarded_hop("", 1), "");
    EXPECT_EQ(forwarded_hop("10.0.0.1, ", 1), "");
    // 0: the first hop, which the client writes.
    EXPECT_EQ(forwarded_hop("203.0.113.7, 10.0.0.1, 10.0.0.2", 0), "203.0.113.7");
    EXPECT_EQ(forwarded_hop(" , 10.0.0.1", 0), "");
    EXPECT_EQ(forwarded_hop("", 0), "");
}

TEST(RequestRoutes, MatchingRoutesGiveTheirPoliciesOnceWithTheirKeys) {
    std::vector<RequestRoute> routes(5);
    routes[0] = {{"GET", "HEAD"}, "/items*", {}, "api.read", RouteKey::kIp, ""};
    routes[1] = {{"*"}, "*", {"anon"}, "api.anon", RouteKey::kUserOrIp, ""};
    routes[2] = {{"POST"}, "/items", {}, "api.write", RouteKey::kUser, ""};
    routes[3] = {{"*"}, "*", {}, "api.read", RouteKey::kGlobal, ""};  // named again: skipped
    routes[4] = {{"*"}, "*", {}, "api.all", RouteKey::kGlobal, ""};

    RouteRequest get{"GET", "/items/3", "anon", std::nullopt, "203.0.113.7"};
    RouteChecks checks = match_routes(routes, get);
    EXPECT_EQ(checks.policies, (std::vector<std::string>{"api.read", "api.anon", "api.all"}));
    EXPECT_EQ(checks.keys,
              (std::vector<std::string>{"ip:203.0.113.7", "ip:203.0.113.7", "global"}));

    RouteRequest post{"POST", "/items", "authenticated", std::string("u-1"), std::nullopt};
    checks = match_routes(routes, post);
    EXPECT_EQ(checks.policies, (std::vector<std::string>{"api.write", "api.read", "api.all"}));
    EXPECT_EQ(checks.keys, (std::vector<std::string>{"user:u-1", "global", "global"}));

    // A user route without a user is skipped; an address route without one counts as unknown.
    RouteRequest anonymous_post{"POST", "/items", "anon", std::nullopt, std::nullopt};
    checks = match_routes(routes, anonymous_post);
    EXPECT_EQ(checks.policies, (std::vector<std::string>{"api.anon", "api.read", "api.all"}));
    EXPECT_EQ(checks.keys, (std::vector<std::string>{"ip:unknown", "global", "global"}));

    RouteRequest other{"DELETE", "/nothing", "authenticated", std::nullopt, std::nullopt};
    checks = match_routes(std::vector<RequestRoute>(routes.begin(), routes.begin() + 3), other);
    EXPECT_TRUE(checks.policies.empty());
}

TEST(RequestRoutes, KeyNamesAreCheckedAndTheArgumentNamed) {
    EXPECT_EQ(parse_route_key("key", "user_or_ip"), RouteKey::kUserOrIp);
    try {
        parse_route_key("key", "User");
        FAIL() << "no error";
    } catch (const ArgumentError& error) {
        EXPECT_EQ(error.argument(), "key");
    }
}

// A route's tier claim is a path of 1 to 8 JSON member names; the applied routes' claims come
// back in route order (the first one the claims hold gives the tier), and a route that did not
// apply (a policy checked once, under the first route naming it) adds none.
TEST(RequestRoutes, TierClaimsOfTheAppliedRoutesInOrder) {
    EXPECT_TRUE(valid_tier_claim("tier"));
    EXPECT_TRUE(valid_tier_claim("app_metadata.tier"));
    EXPECT_TRUE(valid_tier_claim("a.b.c.d.e.f.g.h"));
    EXPECT_FALSE(valid_tier_claim("a.b.c.d.e.f.g.h.i"));
    EXPECT_FALSE(valid_tier_claim(""));
    EXPECT_FALSE(valid_tier_claim("app_metadata."));
    EXPECT_FALSE(valid_tier_claim(".tier"));
    EXPECT_FALSE(valid_tier_claim("app metadata.tier"));
    EXPECT_FALSE(valid_tier_claim("tier\""));
    EXPECT_EQ(tier_claim_members("app_metadata.tier"),
              (std::vector<std::string>{"app_metadata", "tier"}));
    EXPECT_EQ(tier_claim_members("tier"), (std::vector<std::string>{"tier"}));

    std::vector<RequestRoute> routes(3);
    routes[0].methods = {"*"};
    routes[0].path_pattern = "/posts*";
    routes[0].policy = "activity.create_post";
    routes[0].tier_claim = "app_metadata.tier";
    routes[1].methods = {"*"};
    routes[1].path_pattern = "*";
    routes[1].policy = "api.any";
    routes[2].methods = {"*"};
    routes[2].path_pattern = "*";
    routes[2].policy = "activity.create_post";
    routes[2].tier_claim = "role";
    RouteRequest request{"POST", "/posts", "authenticated", std::string("u-1"), std::nullopt};
    RouteChecks checks = match_routes(routes, request);
    EXPECT_EQ(checks.policies, (std::vector<std::string>{"activity.create_post", "api.any"}));
    EXPECT_EQ(checks.tier_claims, (std::vector<std::string>{"app_metadata.tier"}));
    request.path = "/other";
    checks = match_routes(routes, request);
    EXPECT_EQ(checks.tier_claims, (std::vector<std::string>{"role"}));
}

}  // namespace
}  // namespace ratelimit
