// Which policies a PostgREST request is checked against (ratelimit.pre_request): the rows of
// ratelimit.request_routes matched against the request's method, path and role, each giving a
// policy and the key the request is counted under.
//
// A route matches when its methods hold the request's method (or '*'), its path pattern matches
// the request's path ('*' in a pattern stands for any run of characters, '/' included; every
// other character stands for itself), and its roles are empty or hold the request's role. Every
// matching route applies; a policy named by several matching routes is checked once, under the
// first of them (routes are given in id order).
//
// A route may name where the request's tier is in its JWT claims (tier_claim): the tier of the
// check is the first such claim, among the applied routes, that the claims hold.
//
// Keys (each policy counts in its own namespace; the prefixes keep users and addresses apart
// within one):
//   user        'user:' || the JWT's sub; a request without one skips the route
//   ip          'ip:' || the client address (see forwarded_hop); 'ip:unknown' without one
//   user_or_ip  the user's key when there is a sub, else the address's
//   global      'global': one counter for every request the route matches
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit {

enum class RouteKey { kUser, kIp, kUserOrIp, kGlobal };

// Throws ArgumentError (22023, naming `argument`) for another name.
RouteKey parse_route_key(const char* argument, std::string_view name);

struct RequestRoute {
    std::vector<std::string> methods;  // upper case, or "*"
    std::string path_pattern;
    std::vector<std::string> roles;  // empty: any role
    std::string policy;
    RouteKey key = RouteKey::kUserOrIp;
    // Where the request's tier is in the JWT claims: a path of member names ("app_metadata.tier");
    // empty for none.
    std::string tier_claim;
};

struct RouteRequest {
    std::string method;
    std::string path;
    std::string role;
    std::optional<std::string> user;     // the JWT's sub
    std::optional<std::string> address;  // the client address, canonical text
};

// The policies to check, in route order, and each one's key.
struct RouteChecks {
    std::vector<std::string> policies;
    std::vector<std::string> keys;
    // A matching route is keyed by the user (user, user_or_ip): only then does the request's
    // identity matter, so only then may a malformed one refuse the request.
    bool uses_user = false;
    // The tier claims of the applied routes, in route order: the request's tier is the first of
    // them the claims hold (one tier for the whole all-or-nothing check).
    std::vector<std::string> tier_claims;
};

// A tier claim path is 1 to 8 member names of letters, digits, '_', '-' or '$', joined by '.'.
bool valid_tier_claim(std::string_view path) noexcept;

// The member names of a valid tier claim path, in order.
std::vector<std::string> tier_claim_members(std::string_view path);

RouteChecks match_routes(const std::vector<RequestRoute>& routes, const RouteRequest& request);

bool path_matches(std::string_view pattern, std::string_view path) noexcept;

// The client's address in a forwarding header's value ("a, b, c"), without surrounding blanks,
// for `trusted_proxies` proxies that each append the address they were reached from: the hop
// that many in from the right (1: "c", 2: "b"), which no client can choose. 0 takes the first
// hop ("a"), which the client writes itself unless a proxy replaces the header. Empty when the
// value has fewer hops than that (the request did not pass every trusted proxy) or the hop is
// blank.
std::string_view forwarded_hop(std::string_view value, int trusted_proxies) noexcept;

}  // namespace ratelimit
