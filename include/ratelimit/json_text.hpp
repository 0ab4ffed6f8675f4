// The size of text written as a JSON string, as PostgreSQL's jsonb output writes it: `"` and `\`
// take two bytes, the control characters \b \f \n \r \t two, the other control characters six
// (\u00XX), every other byte one. Used to fit a JSON document into a fixed space by shortening
// one of its strings.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit {

// The bytes `text` takes inside a JSON string's quotes.
std::size_t json_string_bytes(std::string_view text) noexcept;

// The longest prefix of `text` that takes at most `max_bytes` inside a JSON string's quotes and
// does not cut a UTF-8 character.
std::string_view json_string_prefix(std::string_view text, std::size_t max_bytes) noexcept;

}  // namespace ratelimit
