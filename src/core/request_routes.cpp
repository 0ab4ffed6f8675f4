#include "ratelimit/request_routes.hpp"

#include <algorithm>

#include "ratelimit/error.hpp"

namespace ratelimit {

RouteKey parse_route_key(const char* argument, std::string_view name) {
    if (name == "user")
        return RouteKey::kUser;
    if (name == "ip")
        return RouteKey::kIp;
    if (name == "user_or_ip")
        return RouteKey::kUserOrIp;
    if (name == "global")
        return RouteKey::kGlobal;
    throw ArgumentError::invalid(argument, "must be user, ip, user_or_ip or global");
}

bool path_matches(std::string_view pattern, std::string_view path) noexcept {
    // Greedy matching with one backtrack point: the last '*' seen and where the path stood.
    std::size_t p = 0;
    std::size_t s = 0;
    std::size_t star = std::string_view::npos;
    std::size_t star_from = 0;
    while (s < path.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            star_from = s;
        } else if (p < pattern.size() && pattern[p] == path[s]) {
            ++p;
            ++s;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            s = ++star_from;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*')
        ++p;
    return p == pattern.size();
}

std::string_view forwarded_hop(std::string_view value, int trusted_proxies) noexcept {
    std::string_view hop;
    if (trusted_proxies <= 0) {
        hop = value.substr(0, value.find(','));
    } else {
        // Walk the hops from the right: the last comma-separated part is hop 1.
        std::size_t end = value.size();
        for (int n = 1;; ++n) {
            const std::size_t comma = end == 0 ? std::string_view::npos : value.rfind(',', end - 1);
            const std::size_t begin = comma == std::string_view::npos ? 0 : comma + 1;
            if (n == trusted_proxies) {
                hop = value.substr(begin, end - begin);
                break;
            }
            if (comma == std::string_view::npos)
                return {};
            end = comma;
        }
    }
    const auto blank = [](char c) { return c == ' ' || c == '\t'; };
    while (!hop.empty() && blank(hop.front()))
        hop.remove_prefix(1);
    while (!hop.empty() && blank(hop.back()))
        hop.remove_suffix(1);
    return hop;
}

namespace {

bool holds(const std::vector<std::string>& list, std::string_view value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

RouteChecks match_routes(const std::vector<RequestRoute>& routes, const RouteRequest& request) {
    RouteChecks checks;
    const std::string address_key = "ip:" + request.address.value_or("unknown");
    for (const RequestRoute& route : routes) {
        if (!holds(route.methods, "*") && !holds(route.methods, request.method))
            continue;
        if (!route.roles.empty() && !holds(route.roles, request.role))
            continue;
        if (!path_matches(route.path_pattern, request.path))
            continue;
        if (holds(checks.policies, route.policy))
            continue;
        std::string key;
        if (route.key == RouteKey::kUser || route.key == RouteKey::kUserOrIp)
            checks.uses_user = true;
        switch (route.key) {
            case RouteKey::kUser:
                if (!request.user)
                    continue;
                key = "user:" + *request.user;
                break;
            case RouteKey::kIp:
                key = address_key;
                break;
            case RouteKey::kUserOrIp:
                key = request.user ? "user:" + *request.user : address_key;
                break;
            case RouteKey::kGlobal:
                key = "global";
                break;
        }
        checks.policies.push_back(route.policy);
        checks.keys.push_back(std::move(key));
        if (!route.tier_claim.empty())
            checks.tier_claims.push_back(route.tier_claim);
    }
    return checks;
}

bool valid_tier_claim(std::string_view path) noexcept {
    if (path.empty() || path.size() > 200)
        return false;
    int members = 1;
    bool in_member = false;
    for (const char c : path) {
        if (c == '.') {
            if (!in_member || ++members > 8)
                return false;
            in_member = false;
            continue;
        }
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '$';
        if (!ok)
            return false;
        in_member = true;
    }
    return in_member;
}

std::vector<std::string> tier_claim_members(std::string_view path) {
    std::vector<std::string> members;
    std::size_t start = 0;
    for (std::size_t dot = path.find('.'); dot != std::string_view::npos;
         start = dot + 1, dot = path.find('.', start))
        members.emplace_back(path.substr(start, dot - start));
    members.emplace_back(path.substr(start));
    return members;
}

}  // namespace ratelimit
