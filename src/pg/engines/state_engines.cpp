#include "pg/engines/state_engines.hpp"

#include <algorithm>
#include <numeric>

#include "pg/bridge/arguments.hpp"
#include "pg/bridge/guard.hpp"
#include "pg/engines/memory_engine.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/resowner.h"
}

namespace ratelimit::pg {
namespace {

bool is_bucket(Algorithm algorithm) {
    return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

// A row's state for the core. The bucket algorithms keep the limit and period their state was
// measured in as the row's two log values (the log column is otherwise sliding_window's).
KeyState state_of(const StoredKeyRow& row) {
    KeyState state;
    if (!row.found)
        return state;
    state.algorithm = static_cast<Algorithm>(row.algorithm);
    state.instant = row.instant;
    state.amount = row.amount;
    state.carry = row.carry;
    state.blocked_until = row.blocked_until;
    if (is_bucket(state.algorithm)) {
        if (row.log_values == 2) {
            state.measured_limit = row.log[0];
            state.measured_period = row.log[1];
        }
        return state;
    }
    for (int i = 0; i + 1 < row.log_values; i += 2)
        state.log.push_back(LogEntry{row.log[i], row.log[i + 1]});
    return state;
}

// Copies `state` into `row` for writing; the log goes into palloc'd memory.
void store_state(const KeyState& state, Micros expires_at, StoredKeyRow* row) {
    row->algorithm = static_cast<std::int16_t>(state.algorithm);
    row->instant = state.instant;
    row->amount = state.amount;
    row->carry = state.carry;
    row->blocked_until = state.blocked_until;
    row->expires_at = expires_at;
    const bool measured = is_bucket(state.algorithm) && state.measured_limit > 0;
    row->log_values = measured ? 2 : static_cast<int>(state.log.size() * 2);
    std::int64_t* log = nullptr;
    if (row->log_values > 0) {
        call_postgres([&] {
            log = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * row->log_values));
        });
        if (measured) {
            log[0] = state.measured_limit;
            log[1] = state.measured_period;
        } else {
            for (std::size_t i = 0; i < state.log.size(); ++i) {
                log[2 * i] = state.log[i].at;
                log[2 * i + 1] = state.log[i].units;
            }
        }
    }
    row->log = log;
}

// Read, decide, write; again if another transaction wrote the key in between (the rules are in
// key_state_table.hpp). With `before`, it also gets what a peek said of the same version.
Decision decide_row(const KeyStateTable& table, const StateKey& key, const Limit& limit, Micros now,
                    std::int64_t cost, Action action, bool writing, Decision* before) {
    Decision decision;
    for (bool written = false; !written;) {
        StoredKeyRow row;
        call_postgres([&] { read_key_row(table, key, &row); });
        KeyState state = state_of(row);
        if (before != nullptr) {
            KeyState unchanged = state;
            *before = ratelimit::decide(limit, unchanged, now, cost, Action::kPeek);
            if (!before->allowed)
                return *before;
        }
        decision = ratelimit::decide(limit, state, now, cost, action);
        if (!writing || !decision.state_changed)
            break;
        store_state(state, idle_from(limit, state), &row);
        call_postgres([&] { written = write_key_row(table, key, row); });
    }
    return decision;
}

void open_table(Oid schema, Engine engine, bool writing, const char* function_name,
                KeyStateTable* table) {
    call_postgres([&] { open_key_state_table(schema, engine, writing, function_name, table); });
}

void close_table(KeyStateTable* table) {
    call_postgres([&] { close_key_state_table(table); });
}

// The two table engines' side of an all-or-nothing decision: one subtransaction around every
// table key of the call, undone when any tier denies.
class TableTierEngine final : public TierEngine {
  public:
    // With `alone` (the only tier of the decision) no subtransaction is needed: a tier that
    // denies writes nothing, so there is never anything to undo.
    TableTierEngine(const std::vector<StateKey>& keys, Oid schema, const char* function_name,
                    bool alone)
        : keys_(keys), schema_(schema), function_name_(function_name), alone_(alone) {}

    bool transactional() const override { return true; }

    void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                bool /*charge*/) override {
        if (count == 0)
            return;
        if (!alone_)
            begin();
        const Engine engine = tiers[0]->engine;
        KeyStateTable table;
        open_table(schema_, engine, true, function_name_, &table);
        for (std::size_t i = 0; i < count; ++i) {
            TierCall& tier = *tiers[i];
            tier.result = decide_row(table, keys_[tier.index], tier.limit, now, cost,
                                     Action::kConsume, true, &tier.before);
            tier.charged = tier.before.allowed;
        }
        close_table(&table);
    }

    void undo() override { finish(false); }
    void keep() override { finish(true); }

    // The subtransaction must be gone before an error travels on, or whoever catches it would
    // roll back ours instead of theirs.
    void abandon() noexcept override {
        if (!open_)
            return;
        open_ = false;
        try {
            call_postgres([&] {
                RollbackAndReleaseCurrentSubTransaction();
                MemoryContextSwitchTo(caller_context_);
                CurrentResourceOwner = caller_owner_;
            });
        } catch (...) {
            // The error already in flight is the one to report; the transaction aborts anyway.
        }
    }

  private:
    void begin() {
        if (open_)
            return;
        call_postgres([&] {
            caller_context_ = CurrentMemoryContext;
            caller_owner_ = CurrentResourceOwner;
            BeginInternalSubTransaction(nullptr);
            MemoryContextSwitchTo(caller_context_);
        });
        open_ = true;
    }

    void finish(bool keep) {
        if (!open_)
            return;
        open_ = false;
        call_postgres([&] {
            if (keep)
                ReleaseCurrentSubTransaction();
            else
                RollbackAndReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(caller_context_);
            CurrentResourceOwner = caller_owner_;
        });
    }

    const std::vector<StateKey>& keys_;
    Oid schema_;
    const char* function_name_;
    bool alone_;
    bool open_ = false;
    MemoryContext caller_context_ = nullptr;
    ResourceOwner caller_owner_ = nullptr;
};

// The memory engine's side: every key's partition locked for the whole group.
class MemoryTierEngine final : public TierEngine {
  public:
    explicit MemoryTierEngine(const std::vector<StateKey>& keys) : keys_(keys) {}

    bool transactional() const override { return false; }

    void decide(TierCall* const* tiers, std::size_t count, Micros now, std::int64_t cost,
                bool charge) override {
        if (count == 1) {
            // One key: one decision under its partition's lock; a denied consume changes
            // nothing, so it also says how the key stands.
            TierCall& tier = *tiers[0];
            tier.before = memory_decide(memory_key(keys_[tier.index]), tier.limit, now, cost,
                                        charge ? Action::kConsume : Action::kPeek);
            tier.result = tier.before;
            tier.charged = charge && tier.before.allowed;
            return;
        }
        std::vector<MemoryTierCall> calls(count);
        for (std::size_t i = 0; i < count; ++i) {
            calls[i].key = memory_key(keys_[tiers[i]->index]);
            calls[i].limit = tiers[i]->limit;
            calls[i].enforced = tiers[i]->enforced;
        }
        memory_consume_all(calls.data(), static_cast<int>(count), now, cost, charge);
        for (std::size_t i = 0; i < count; ++i) {
            tiers[i]->before = calls[i].before;
            tiers[i]->result = calls[i].result;
            tiers[i]->charged = calls[i].charged;
        }
    }

    void undo() override {}
    void keep() override {}
    void abandon() noexcept override {}

  private:
    const std::vector<StateKey>& keys_;
};

}  // namespace

Datum native_space() {
    static text* empty = nullptr;
    if (empty == nullptr) {
        call_postgres([&] {
            text* value = static_cast<text*>(MemoryContextAlloc(TopMemoryContext, VARHDRSZ));
            SET_VARSIZE(value, VARHDRSZ);
            empty = value;
        });
    }
    return PointerGetDatum(empty);
}

void TableStateEngine::open(Engine engine, Oid schema, const char* function_name) {
    engine_ = engine;
    schema_ = schema;
    function_name_ = function_name;
}

Decision TableStateEngine::decide(const StateKey& key, const Limit& limit, Micros now,
                                  std::int64_t cost, Action action) {
    const bool writing = action != Action::kPeek;
    KeyStateTable table;
    open_table(schema_, engine_, writing, function_name_, &table);
    const Decision decision = decide_row(table, key, limit, now, cost, action, writing, nullptr);
    close_table(&table);
    return decision;
}

void TableStateEngine::decide_each(const std::vector<StateKey>& keys, const Limit& limit,
                                   Micros now, std::int64_t cost, Action action,
                                   Decision* decisions) {
    const bool writing = action != Action::kPeek;
    KeyStateTable table;
    open_table(schema_, engine_, writing, function_name_, &table);
    for (std::size_t i = 0; i < keys.size(); ++i)
        decisions[i] = decide_row(table, keys[i], limit, now, cost, action, writing, nullptr);
    close_table(&table);
}

Micros TableStateEngine::block(const StateKey& key, Micros until, Micros /*now*/) {
    KeyStateTable table;
    open_table(schema_, engine_, true, function_name_, &table);
    Micros blocked_until = 0;
    for (bool written = false; !written;) {
        StoredKeyRow row;
        call_postgres([&] { read_key_row(table, key, &row); });
        KeyState state = state_of(row);
        block_until(state, until);
        blocked_until = state.blocked_until;
        store_state(state, std::max<Micros>(row.expires_at, state.blocked_until), &row);
        call_postgres([&] { written = write_key_row(table, key, row); });
    }
    close_table(&table);
    return blocked_until;
}

bool TableStateEngine::reset(const StateKey& key) {
    KeyStateTable table;
    open_table(schema_, engine_, true, function_name_, &table);
    bool existed = false;
    call_postgres([&] {
        for (;;) {
            StoredKeyRow row;
            read_key_row(table, key, &row);
            existed = row.found;
            if (!row.found || delete_key_row(table, row))
                break;
        }
    });
    close_table(&table);
    return existed;
}

Decision MemoryStateEngine::decide(const StateKey& key, const Limit& limit, Micros now,
                                   std::int64_t cost, Action action) {
    return memory_decide(memory_key(key), limit, now, cost, action);
}

void MemoryStateEngine::decide_each(const std::vector<StateKey>& keys, const Limit& limit,
                                    Micros now, std::int64_t cost, Action action,
                                    Decision* decisions) {
    std::vector<MemoryKey> hashed(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i)
        hashed[i] = memory_key(keys[i]);
    memory_decide_each(hashed.data(), hashed.size(), limit, now, cost, action, decisions);
}

Micros MemoryStateEngine::block(const StateKey& key, Micros until, Micros now) {
    return memory_block(memory_key(key), until, now);
}

bool MemoryStateEngine::reset(const StateKey& key) {
    return memory_reset(memory_key(key));
}

StateEngine& state_engine(Engine engine, Oid schema, const char* function_name,
                          EngineStorage& storage) {
    if (engine == Engine::kMemory)
        return storage.memory;
    storage.table.open(engine, schema, function_name);
    return storage.table;
}

void sort_tiers(std::vector<TierCall>& tiers, const std::vector<StateKey>& keys) {
    std::stable_sort(tiers.begin(), tiers.end(), [&](const TierCall& a, const TierCall& b) {
        if (a.engine != b.engine)
            return a.engine < b.engine;
        const StateKey& ka = keys[a.index];
        const StateKey& kb = keys[b.index];
        const std::string_view sa = text_bytes(ka.space), sb = text_bytes(kb.space);
        if (sa != sb)
            return sa < sb;
        return text_bytes(ka.key) < text_bytes(kb.key);
    });
}

bool decide_tiers(std::vector<TierCall>& tiers, const std::vector<StateKey>& keys, Oid schema,
                  const char* function_name, Micros now, std::int64_t cost) {
    TableTierEngine table(keys, schema, function_name, tiers.size() == 1);
    MemoryTierEngine memory(keys);
    TierEngine* const engines[3] = {&table, &table, &memory};
    return decide_all_or_nothing(tiers, engines, now, cost);
}

}  // namespace ratelimit::pg
