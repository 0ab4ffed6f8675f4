#include "ratelimit/json_text.hpp"

namespace ratelimit {
namespace {

std::size_t escaped_bytes(unsigned char c) noexcept {
    switch (c) {
        case '"':
        case '\\':
        case '\b':
        case '\f':
        case '\n':
        case '\r':
        case '\t':
            return 2;
        default:
            return c < 0x20 ? 6 : 1;
    }
}

}  // namespace

std::size_t json_string_bytes(std::string_view text) noexcept {
    std::size_t bytes = 0;
    for (const char c : text)
        bytes += escaped_bytes(static_cast<unsigned char>(c));
    return bytes;
}

std::string_view json_string_prefix(std::string_view text, std::size_t max_bytes) noexcept {
    std::size_t bytes = 0;
    std::size_t end = 0;
    while (end < text.size()) {
        const std::size_t next = bytes + escaped_bytes(static_cast<unsigned char>(text[end]));
        if (next > max_bytes)
            break;
        bytes = next;
        ++end;
    }
    // Back off over continuation bytes (10xxxxxx) to the start of the cut character.
    if (end < text.size()) {
        while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
            --end;
    }
    return text.substr(0, end);
}

}  // namespace ratelimit
