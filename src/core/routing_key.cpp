#include "ratelimit/routing_key.hpp"

namespace ratelimit {

std::string_view routing_key(std::string_view key) noexcept {
    const std::size_t open = key.find('{');
    if (open == std::string_view::npos)
        return key;
    const std::size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1)
        return key;
    return key.substr(open + 1, close - open - 1);
}

}  // namespace ratelimit
