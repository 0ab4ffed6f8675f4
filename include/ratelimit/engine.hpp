// Where a key's state lives. The SQL spelling is the p_engine argument of the native API.
#pragma once

#include <string_view>

namespace ratelimit {

enum class Engine {
    kTable,     // a logged table: transactional, survives crashes
    kUnlogged,  // an unlogged table: transactional, emptied after a crash, no WAL
    kMemory,    // shared memory: not transactional, bounded, saved at clean shutdown
};

const char* engine_name(Engine engine) noexcept;

// Throws ArgumentError (22023, naming `argument`) for an unknown name.
Engine parse_engine(const char* argument, std::string_view name);

}  // namespace ratelimit
