// Errors raised by the core. The core never talks to PostgreSQL: it throws one of these, and
// the SQL entry guard (src/pg/bridge/guard.hpp) turns it into an ERROR with the matching SQLSTATE.
#pragma once

#include <exception>
#include <string>

namespace ratelimit {

enum class ErrorKind {
    kNullArgument,     // SQLSTATE 22004: a required argument is NULL
    kInvalidArgument,  // SQLSTATE 22023: an argument is out of its documented range
    kNotAllowed,       // SQLSTATE 42501: the caller may not act on this argument
};

// A bad argument. `argument` names the parameter (or setting) exactly as the caller spells it.
class ArgumentError : public std::exception {
  public:
    ArgumentError(ErrorKind kind, std::string argument, std::string message)
        : kind_(kind), argument_(std::move(argument)), message_(std::move(message)) {}

    static ArgumentError null(const std::string& argument) {
        return ArgumentError(ErrorKind::kNullArgument, argument, argument + " must not be NULL");
    }
    static ArgumentError invalid(const std::string& argument, const std::string& detail) {
        return ArgumentError(ErrorKind::kInvalidArgument, argument, argument + " " + detail);
    }

    static ArgumentError not_allowed(const std::string& argument, const std::string& detail) {
        return ArgumentError(ErrorKind::kNotAllowed, argument, argument + " " + detail);
    }

    ErrorKind kind() const noexcept { return kind_; }
    const std::string& argument() const noexcept { return argument_; }
    const char* what() const noexcept override { return message_.c_str(); }

  private:
    ErrorKind kind_;
    std::string argument_;
    std::string message_;
};

}  // namespace ratelimit
