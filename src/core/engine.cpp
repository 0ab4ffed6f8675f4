#include "ratelimit/engine.hpp"

#include <string>

#include "ratelimit/error.hpp"

namespace ratelimit {

const char* engine_name(Engine engine) noexcept {
    switch (engine) {
        case Engine::kTable:
            return "table";
        case Engine::kUnlogged:
            return "unlogged";
        case Engine::kMemory:
            return "memory";
    }
    return "table";
}

Engine parse_engine(const char* argument, std::string_view name) {
    for (Engine candidate : {Engine::kTable, Engine::kUnlogged, Engine::kMemory}) {
        if (name == engine_name(candidate))
            return candidate;
    }
    throw ArgumentError::invalid(argument, "must be one of table, unlogged, memory (got \"" +
                                               std::string(name.substr(0, 64)) + "\")");
}

}  // namespace ratelimit
