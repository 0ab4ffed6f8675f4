// The engines behind one interface: where a key's state lives (a logged table, an unlogged
// table, shared memory), for the native API and the policies alike. Each engine reads a key's
// state, lets the core decide, and writes the state back the way that engine stays exact
// (src/pg/engines/key_state_table.hpp, src/pg/engines/memory_engine.cpp). The all-or-nothing
// decision over several keys is the core's (ratelimit/policy.hpp); the engines here are its
// TierEngines.
#pragma once

#include <cstdint>
#include <vector>

#include "pg/engines/key_state_table.hpp"
#include "pg/bridge/postgres.hpp"
#include "ratelimit/algorithms.hpp"
#include "ratelimit/engine.hpp"
#include "ratelimit/policy.hpp"

namespace ratelimit::pg {

// One key's state on one engine.
class StateEngine {
  public:
    virtual ~StateEngine() = default;
    virtual Decision decide(const StateKey& key, const Limit& limit, Micros now, std::int64_t cost,
                            Action action) = 0;
    // decisions[i] = decide(keys[i], ...), in order, each on its own (a key given twice is
    // decided twice); the table engines open their table once for all of them.
    virtual void decide_each(const std::vector<StateKey>& keys, const Limit& limit, Micros now,
                             std::int64_t cost, Action action, Decision* decisions) = 0;
    // Blocks the key until `until` (never shortening a block); returns the block's end.
    virtual Micros block(const StateKey& key, Micros until, Micros now) = 0;
    // Forgets the key; true if it had state.
    virtual bool reset(const StateKey& key) = 0;
};

// The engine `engine` for keys of the extension in `schema`; `function_name` names the caller
// in errors (a read-only transaction refusing a table write). The object lives in `storage`.
struct EngineStorage;
StateEngine& state_engine(Engine engine, Oid schema, const char* function_name,
                          EngineStorage& storage);

// Several keys decided as one (ratelimit.consume_all and the policy calls). `keys[i]` is the
// key of the tier whose TierCall::index is i. Table tiers must be sorted by (engine, key) by
// the caller (sort_tiers does it). Returns whether the call was allowed.
bool decide_tiers(std::vector<TierCall>& tiers, const std::vector<StateKey>& keys, Oid schema,
                  const char* function_name, Micros now, std::int64_t cost);

// Orders `tiers` so that two calls over the same table keys take their rows in the same order.
void sort_tiers(std::vector<TierCall>& tiers, const std::vector<StateKey>& keys);

// The namespace of the native API's keys: the empty text.
Datum native_space();

// ---- storage for state_engine(): plain members, so that it can sit on any C++ stack ----

class TableStateEngine final : public StateEngine {
  public:
    TableStateEngine() = default;
    void open(Engine engine, Oid schema, const char* function_name);
    Decision decide(const StateKey& key, const Limit& limit, Micros now, std::int64_t cost,
                    Action action) override;
    void decide_each(const std::vector<StateKey>& keys, const Limit& limit, Micros now,
                     std::int64_t cost, Action action, Decision* decisions) override;
    Micros block(const StateKey& key, Micros until, Micros now) override;
    bool reset(const StateKey& key) override;

  private:
    Engine engine_ = Engine::kTable;
    Oid schema_ = InvalidOid;
    const char* function_name_ = nullptr;
};

class MemoryStateEngine final : public StateEngine {
  public:
    Decision decide(const StateKey& key, const Limit& limit, Micros now, std::int64_t cost,
                    Action action) override;
    void decide_each(const std::vector<StateKey>& keys, const Limit& limit, Micros now,
                     std::int64_t cost, Action action, Decision* decisions) override;
    Micros block(const StateKey& key, Micros until, Micros now) override;
    bool reset(const StateKey& key) override;
};

struct EngineStorage {
    TableStateEngine table;
    MemoryStateEngine memory;
};

}  // namespace ratelimit::pg
