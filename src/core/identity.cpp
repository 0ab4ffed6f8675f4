#include "ratelimit/identity.hpp"

#include <cstring>

#include "ratelimit/error.hpp"

namespace ratelimit {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// A strict RFC 8259 reader that only keeps what find_top_level_member needs. Nesting is bounded
// so that hostile claims cannot exhaust the stack.
class JsonReader {
  public:
    explicit JsonReader(std::string_view text) : text_(text) {}

    bool read_object_looking_for(std::string_view name, JsonMember* found) {
        skip_space();
        if (!consume('{'))
            return false;
        skip_space();
        if (!consume('}')) {
            for (;;) {
                std::string key;
                skip_space();
                if (!read_string(&key))
                    return false;
                skip_space();
                if (!consume(':'))
                    return false;
                skip_space();
                JsonMember value;
                if (!read_value(0, &value))
                    return false;
                if (key == name)
                    *found = std::move(value);
                skip_space();
                if (consume(','))
                    continue;
                if (consume('}'))
                    break;
                return false;
            }
        }
        skip_space();
        return pos_ == text_.size();
    }

  private:
    static constexpr int kMaxDepth = 128;

    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }
    bool consume(char c) {
        if (peek() != c || at_end())
            return false;
        ++pos_;
        return true;
    }
    void skip_space() {
        while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                             text_[pos_] == '\r'))
            ++pos_;
    }

    // Reads any value; `kind_out`, when given, learns what kind of value it was.
    bool read_value(int depth, JsonMember* kind_out) {
        if (depth > kMaxDepth)
            return false;
        JsonMember::Kind kind = JsonMember::Kind::kOtherValue;
        bool ok = false;
        switch (peek()) {
            case '"':
                kind = JsonMember::Kind::kString;
                ok = read_string(kind_out ? &kind_out->text : nullptr);
                break;
            case '{':
                ok = read_container(depth, '}', true);
                break;
            case '[':
                ok = read_container(depth, ']', false);
                break;
            case 't':
                ok = read_literal("true");
                break;
            case 'f':
                ok = read_literal("false");
                break;
            case 'n':
                kind = JsonMember::Kind::kNull;
                ok = read_literal("null");
                break;
            default:
                ok = read_number();
        }
        if (ok && kind_out)
            kind_out->kind = kind;
        return ok;
    }

    bool read_container(int depth, char close, bool is_object) {
        ++pos_;  // the opening bracket
        skip_space();
        if (consume(close))
            return true;
        for (;;) {
            skip_space();
            if (is_object) {
                if (!read_string(nullptr))
                    return false;
                skip_space();
                if (!consume(':'))
                    return false;
                skip_space();
            }
            if (!read_value(depth + 1, nullptr))
                return false;
            skip_space();
            if (consume(','))
                continue;
            return consume(close);
        }
    }

    bool read_literal(const char* literal) {
        std::size_t n = std::strlen(literal);
        if (text_.substr(pos_, n) != literal)
            return false;
        pos_ += n;
        return true;
    }

    bool read_digits() {
        std::size_t start = pos_;
        while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9')
            ++pos_;
        return pos_ > start;
    }

    bool read_number() {
        consume('-');
        if (consume('0')) {
            // a leading zero stands alone
        } else if (!read_digits()) {
            return false;
        }
        if (consume('.') && !read_digits())
            return false;
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-')
                ++pos_;
            if (!read_digits())
                return false;
        }
        return true;
    }

    bool read_hex4(unsigned* out) {
        if (pos_ + 4 > text_.size())
            return false;
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            int h = hex_value(text_[pos_ + i]);
            if (h < 0)
                return false;
            v = v * 16 + static_cast<unsigned>(h);
        }
        pos_ += 4;
        *out = v;
        return true;
    }

    static void append_utf8(std::string* out, unsigned cp) {
        if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }

    bool read_escape(std::string* out) {
        char c = peek();
        ++pos_;
        char plain = '\0';
        switch (c) {
            case '"':
                plain = '"';
                break;
            case '\\':
                plain = '\\';
                break;
            case '/':
                plain = '/';
                break;
            case 'b':
                plain = '\b';
                break;
            case 'f':
                plain = '\f';
                break;
            case 'n':
                plain = '\n';
                break;
            case 'r':
                plain = '\r';
                break;
            case 't':
                plain = '\t';
                break;
            case 'u': {
                unsigned cp = 0;
                if (!read_hex4(&cp) || cp == 0)
                    return false;  // jsonb refuses \u0000 too
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned low = 0;
                    if (!consume('\\') || !consume('u') || !read_hex4(&low) || low < 0xDC00 ||
                        low > 0xDFFF)
                        return false;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return false;
                }
                if (out)
                    append_utf8(out, cp);
                return true;
            }
            default:
                return false;
        }
        if (out)
            out->push_back(plain);
        return true;
    }

    bool read_string(std::string* out) {
        if (!consume('"'))
            return false;
        while (!at_end()) {
            char c = text_[pos_];
            if (c == '"') {
                ++pos_;
                return true;
            }
            if (static_cast<unsigned char>(c) < 0x20)
                return false;
            if (c == '\\') {
                ++pos_;
                if (!read_escape(out))
                    return false;
                continue;
            }
            if (out)
                out->push_back(c);
            ++pos_;
        }
        return false;
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

bool is_set(const char* setting) {
    return setting != nullptr && setting[0] != '\0';
}

}  // namespace

std::optional<Uuid> parse_uuid(std::string_view text) {
    bool hyphenated = text.size() == 36;
    if (!hyphenated && text.size() != 32)
        return std::nullopt;
    Uuid out{};
    std::size_t digit = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (hyphenated && (i == 8 || i == 13 || i == 18 || i == 23)) {
            if (text[i] != '-')
                return std::nullopt;
            continue;
        }
        int h = hex_value(text[i]);
        if (h < 0)
            return std::nullopt;
        out[digit / 2] = static_cast<std::uint8_t>(out[digit / 2] * 16 + h);
        ++digit;
    }
    return out;
}

std::optional<JsonMember> find_top_level_member(std::string_view json, std::string_view name) {
    JsonMember found;
    JsonReader reader(json);
    if (!reader.read_object_looking_for(name, &found))
        return std::nullopt;
    return found;
}

std::optional<Uuid> resolve_caller(const char* claim_sub_setting, const char* claims_setting) {
    if (is_set(claim_sub_setting)) {
        std::optional<Uuid> id = parse_uuid(claim_sub_setting);
        if (!id) {
            throw ArgumentError::invalid("request.jwt.claim.sub", "must be a UUID");
        }
        return id;
    }
    if (!is_set(claims_setting))
        return std::nullopt;

    std::optional<JsonMember> sub = find_top_level_member(claims_setting, "sub");
    if (!sub) {
        throw ArgumentError::invalid("request.jwt.claims", "must be a JSON object");
    }
    switch (sub->kind) {
        case JsonMember::Kind::kAbsent:
        case JsonMember::Kind::kNull:
            return std::nullopt;
        case JsonMember::Kind::kString:
            if (std::optional<Uuid> id = parse_uuid(sub->text))
                return id;
            break;
        case JsonMember::Kind::kOtherValue:
            break;
    }
    throw ArgumentError::invalid("request.jwt.claims", "has a \"sub\" claim that is not a UUID");
}

}  // namespace ratelimit
