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

std::optional<Subject> resolve_subject(const char* claim_sub_setting,
                                       const std::optional<SubClaim>& claims_sub) {
    if (is_set(claim_sub_setting))
        return Subject{claim_sub_setting, "request.jwt.claim.sub"};
    if (!claims_sub)
        return std::nullopt;
    switch (claims_sub->kind) {
        case SubClaim::Kind::kNotAnObject:
            throw ArgumentError::invalid("request.jwt.claims", "must be a JSON object");
        case SubClaim::Kind::kAbsent:
        case SubClaim::Kind::kNull:
            return std::nullopt;
        case SubClaim::Kind::kString:
            if (claims_sub->text.empty())
                throw ArgumentError::invalid("request.jwt.claims", "has an empty \"sub\" claim");
            return Subject{claims_sub->text, "request.jwt.claims"};
        case SubClaim::Kind::kOtherValue:
            break;
    }
    throw ArgumentError::invalid("request.jwt.claims",
                                 "has a \"sub\" claim that is not a string or null");
}

std::optional<Uuid> subject_uuid(const std::optional<Subject>& subject) {
    if (!subject)
        return std::nullopt;
    if (std::optional<Uuid> id = parse_uuid(subject->text))
        return id;
    if (std::strcmp(subject->setting, "request.jwt.claim.sub") == 0)
        throw ArgumentError::invalid(subject->setting, "must be a UUID");
    throw ArgumentError::invalid(subject->setting, "has a \"sub\" claim that is not a UUID");
}

std::optional<Uuid> resolve_caller(const char* claim_sub_setting,
                                   const std::optional<SubClaim>& claims_sub) {
    return subject_uuid(resolve_subject(claim_sub_setting, claims_sub));
}

void require_may_act_on(const std::string& argument, const UserIdCaller& caller,
                        const Uuid& user_id) {
    if (caller.sub) {
        if (*caller.sub != user_id)
            throw ArgumentError::not_allowed(argument, "must be the caller's own id (the JWT sub)");
        return;
    }
    if (caller.jwt_role) {
        throw ArgumentError::not_allowed(
            argument, "needs a JWT sub claim: a request without one cannot act on a user's id");
    }
}

std::string uuid_text(const Uuid& id) {
    static const char kHex[] = "0123456789abcdef";
    std::string text;
    text.reserve(36);
    for (std::size_t i = 0; i < id.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            text += '-';
        text += kHex[id[i] >> 4];
        text += kHex[id[i] & 0xF];
    }
    return text;
}

}  // namespace ratelimit
