// The routing key of a sharded key: its hash tag when it has a non-empty one, else the key.
#include <gtest/gtest.h>

#include "ratelimit/routing_key.hpp"

using ratelimit::routing_key;

TEST(RoutingKey, AKeyWithoutATagIsItsOwnRoutingKey) {
    EXPECT_EQ(routing_key("plain"), "plain");
    EXPECT_EQ(routing_key(""), "");
    EXPECT_EQ(routing_key("closed}only"), "closed}only");
}

TEST(RoutingKey, TheFirstNonEmptyTagAfterTheFirstBraceIsTheRoutingKey) {
    EXPECT_EQ(routing_key("cart:{user-7}"), "user-7");
    EXPECT_EQ(routing_key("checkout:{user-7}:items"), "user-7");
    EXPECT_EQ(routing_key("{a}{b}"), "a");
    EXPECT_EQ(routing_key("x{a{b}c}"), "a{b");  // the first '}' after the first '{' closes it
}

TEST(RoutingKey, AnEmptyOrUnclosedTagRoutesByTheWholeKey) {
    // As Redis Cluster: only the first '{' opens a tag; when its tag is empty or never closed,
    // the whole key is hashed (a later "{b}" is not looked at).
    EXPECT_EQ(routing_key("a{}{b}"), "a{}{b}");
    EXPECT_EQ(routing_key("open{never"), "open{never");
    EXPECT_EQ(routing_key("{}"), "{}");
}

TEST(RoutingKey, MultibyteTextIsKeptWhole) {
    EXPECT_EQ(routing_key("caf\xc3\xa9:{\xe2\x82\xac-7}"), "\xe2\x82\xac-7");
}
