-- The SQL edition's decisions: the core's rules (src/core/algorithms.cpp, validation.cpp,
-- limit_checks.cpp) and the table engines (src/pg/engines/) in PL/pgSQL, deciding exactly as
-- the C edition: the same decisions, the same state rows, the same errors. The native API
-- (sql/sql_edition/bodies/native_api.sql) and the policy calls are made of these functions:
--
--   ratelimit.checked_limit(p_limit, p_period, p_algorithm, p_engine, p_burst, p_time_zone,
--                           p_cost, p_with_cost) -> ratelimit.limit_values
--       Checks a limit's arguments in the C edition's order, with its SQLSTATEs and messages
--       (validate_limit's checks; with p_with_cost, consume's, p_cost among them), and returns
--       the limit in microseconds. A calendar period's window is not known until the clock is
--       read: ratelimit.limit_at gives it.
--
--   ratelimit.key_decide(p_engine, p_space, p_key, p_limit, p_period, p_cost, p_algorithm,
--                        p_burst, p_time_zone, p_max_wait, p_action, p_now) -> ratelimit.decision
--   ratelimit.key_decide_micros(...the same...) -> ratelimit.key_decision
--       One key of namespace p_space ('' for the native API, a policy's name for its
--       subjects) decided at p_now (Unix microseconds), as StateEngine::decide: p_action
--       'consume', 'peek', 'refund' or 'charge' (counts p_cost whatever remains, as a penalty
--       counter is charged). The arguments must have passed checked_limit (p_max_wait NULL or
--       a checked span); p_engine 'table' or 'unlogged'. key_decide answers as the native API
--       does (milliseconds rounded up, retry_after_ms NULL for a cost no wait will allow);
--       key_decide_micros answers in microseconds, with whether the key was blocked and
--       whether the cost could never be allowed.
--
--   ratelimit.key_block(p_engine, p_space, p_key, p_until, p_now) -> bigint
--       Blocks the key until p_until (an existing later block stays); returns the block's end.
--   ratelimit.key_reset(p_engine, p_space, p_key) -> boolean
--       Forgets the key; true if it had a row.
--
--   ratelimit.decide_tiers(p_engines, p_spaces, p_keys, p_limits, p_periods, p_algorithms,
--                          p_bursts, p_time_zones, p_max_waits, p_enforced, p_cost, p_now,
--                          OUT allowed, OUT decisions)
--       Several limits decided as one, all or nothing (ratelimit/policy.hpp): element i of each
--       array describes tier i, one key of one namespace on one engine, its limit checked as
--       checked_limit checks it (p_bursts, p_time_zones and p_max_waits may hold NULLs: no
--       burst, no calendar zone, no delay; p_algorithms none). No (engine, space, key) may be
--       given twice: the caller refuses it. The tiers' rows are taken in one order whatever the
--       order given (table before unlogged, then namespace and key, bytewise), so that two
--       calls over the same keys cannot deadlock. Each tier is first looked at as it stands (a
--       peek of p_cost), and charged p_cost if that allows (a tier whose max_wait admits the call
--       later allows it, and is charged as a delayed consume is). allowed: every enforced tier
--       (p_enforced NULL: all of them; false: a shadow tier) allowed. When allowed, the charges
--       stay; when not, every charge is undone (a subtransaction rolled back), so that nothing
--       is charged anywhere. decisions[i], in microseconds: tier i after its charge when the
--       call was allowed and it was charged, else tier i as it stood before the call (its peek:
--       allowed there says whether it would have allowed). A cost above a tier's allowance is
--       that tier's denial (never true), not an error.
--
-- Concurrency: as the C edition's table engines (src/pg/engines/key_state_table.hpp), a
-- decision reads the key's latest committed row with a fresh snapshot (a statement of its own,
-- READ COMMITTED), decides, and writes the version it read only if no other transaction
-- changed it meanwhile (UPDATE ... WHERE ctid AND xmin: a concurrent writer is waited for,
-- then its new version fails the test); a key without a row is created with INSERT ... ON
-- CONFLICT DO NOTHING, which waits for a concurrent first call and then finds its row. Either
-- way a write that fails is followed by a locked read (FOR NO KEY UPDATE) and the decision
-- again, so decisions on one key are serialized, none is lost, and a call that writes nothing
-- (a peek, a denial) takes no lock. The usual allowed consume is one UPDATE whose conditions
-- and new values are the decision itself: READ COMMITTED evaluates them again on the latest
-- version when another transaction wrote the row first, which serializes it the same way.
-- Under REPEATABLE READ and SERIALIZABLE the reads use the transaction's snapshot, and
-- PostgreSQL refuses (40001) a write over a change made after it (the C edition reads the
-- latest version whatever the isolation level): retry the transaction. SERIALIZABLE also takes
-- predicate locks on what the statements read, which the C edition's reads do not.
--
-- The functions here are granted to nobody (privileges.sql's list names none of them) and run
-- only inside the calls of the native API, the policies and the drop-ins, which are SECURITY
-- DEFINER with search_path pinned: they pin nothing and lend no rights themselves, since a SET
-- clause or a SECURITY DEFINER costs every call a save and restore of the settings, and a
-- decision makes several such calls. They name every table and function with its schema.

-- A decision in microseconds: ratelimit.decision before its waits are rounded to milliseconds,
-- with what the native API does not report. "limit" is the burst for token_bucket and gcra.
-- blocked: denied because the key is blocked; never: the cost is above what the key could
-- ever allow (retry_after means nothing then).
CREATE TYPE ratelimit.key_decision AS (
    allowed boolean,
    "limit" bigint,
    remaining bigint,
    retry_after bigint,
    reset_after bigint,
    blocked boolean,
    never boolean
);

-- A limit as the decisions take it (the core's Limit): algorithm as stored in key_state
-- (1 fixed_window, 2 rolling_window, 3 sliding_window, 4 sliding_window_counter,
-- 5 token_bucket, 6 gcra), period and max_delay in microseconds, burst = limit unless given.
-- A calendar period (calendar 1 day, 2 week, 3 month, in time_zone, NULL for UTC) has its
-- window [window_start, window_end) set for the call's instant; period is then its length.
CREATE TYPE ratelimit.limit_values AS (
    algorithm smallint,
    "limit" bigint,
    period bigint,
    burst bigint,
    window_start bigint,
    window_end bigint,
    max_delay bigint,
    calendar smallint,
    time_zone text
);

-- What ratelimit.decide_state decided: the decision (as key_decision), whether the key's state
-- changed (the engine must write it) and, when it did, the state to write as the row's
-- columns (expires_at: from when the row decides like a fresh key, idle_from). cut: a charge
-- went past what a key may owe (the delay of a call is then refused). before: the peek of a
-- tier (ratelimit.key_apply's action 5).
CREATE TYPE ratelimit.state_decision AS (
    allowed boolean,
    "limit" bigint,
    remaining bigint,
    retry_after bigint,
    reset_after bigint,
    blocked boolean,
    never boolean,
    changed boolean,
    cut boolean,
    algorithm smallint,
    instant bigint,
    amount bigint,
    carry bigint,
    log bigint[],
    blocked_until bigint,
    expires_at bigint,
    before ratelimit.key_decision
);

------------------------------------------------------------------------------------------------
-- The decision: the core's decide() on one key's state, written as the row holds it (the
-- bucket algorithms keep the limit and period their state was measured in as the row's two
-- log values; sliding_window keeps its log there as (instant, units) pairs, oldest first).
-- p_action: 0 consume, 1 peek, 2 refund, 3 charge; 4, for the delay of a call only: charge the
-- bucket state given as it is (p_fresh: read as a full bucket) for a call that goes at p_go.
-- Products that can pass 64 bits are numeric, as the core's are 128-bit.
------------------------------------------------------------------------------------------------
CREATE FUNCTION ratelimit.decide_state(
    p_algorithm smallint,
    p_limit bigint,
    p_period bigint,
    p_burst bigint,
    p_window_start bigint,
    p_window_end bigint,
    p_max_delay bigint,
    p_state_algorithm smallint,
    p_instant bigint,
    p_amount bigint,
    p_carry bigint,
    p_log bigint[],
    p_blocked_until bigint,
    p_now bigint,
    p_cost bigint,
    p_action smallint,
    p_fresh boolean DEFAULT false,
    p_go bigint DEFAULT NULL)
RETURNS ratelimit.state_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    -- A decision runs once per call in a transaction of its own, where each statement's first
    -- run costs more than the work it does: the common paths take as few statements as they
    -- can, and nothing here has a default to compute.
    a ALIAS FOR p_algorithm;
    n ALIAS FOR p_limit;
    p ALIAS FOR p_period;
    b ALIAS FOR p_burst;
    ws ALIAS FOR p_window_start;
    we ALIAS FOR p_window_end;
    -- The working state: the caller's (the parameters themselves), or what stands for it (a
    -- fresh state, or a 0.5.0 gcra state read as a bucket), the caller's then kept in o_state.
    -- The algorithms change it only when they write. w_log: the log's whole pairs; w_ml, w_mp:
    -- a bucket's measured limit and period (NULL: none).
    w_instant ALIAS FOR p_instant;
    w_amount ALIAS FOR p_amount;
    w_carry ALIAS FOR p_carry;
    w_blocked ALIAS FOR p_blocked_until;
    w_log bigint[];
    w_ml bigint;
    w_mp bigint;
    o_state bigint[];
    v_fresh boolean;  -- NULL: false
    v_act smallint;   -- the action the algorithm carries out (a blocked consume only looks)
    -- The algorithm's outcome (retry_at: when denied).
    o_allowed boolean;
    o_remaining bigint;
    o_retry_at bigint;
    o_reset_at bigint;
    o_cut boolean;
    -- The decision reported for a write other than an allowed consume.
    d_allowed boolean;
    d_remaining bigint;
    d_retry bigint;
    d_reset bigint;
    d_blocked boolean;
    r ratelimit.state_decision;
    v_idle bigint;
    -- Scratch.
    t bigint;
    w0 bigint;
    e0 bigint;
    len bigint;
    used bigint;
    v_start bigint;
    v_active boolean;
    v_owing boolean;
    v_most_owed bigint;
    v_windows bigint;
    nl integer;
    i integer;
    j integer;
    v_first integer;
    v_still bigint;
    v_added bigint;
    v_return bigint;
    v_taken bigint;
    v_cell bigint;
    v_best integer;
    v_moved numeric;
    v_best_moved numeric;
    v_kept bigint[];
    cur bigint;
    prev bigint;
    v_elapsed bigint;
    v_cap numeric;
    v_total numeric;
    v_level numeric;
    v_whole numeric;
    v_past numeric;
    v_missing numeric;
    v_tokens bigint;
    v_fraction bigint;
    v_stored bigint;
    v_scarry bigint;
BEGIN
    IF p_log IS NOT NULL THEN
        nl := coalesce(pg_catalog.array_length(p_log, 1), 0);
        IF p_state_algorithm >= 5 THEN
            IF nl = 2 THEN
                w_ml := p_log[1];
                w_mp := p_log[2];
            END IF;
        ELSIF nl >= 2 THEN
            w_log := p_log[1:nl - nl % 2];
        END IF;
    END IF;

    IF p_action = 4 THEN
        -- delay(): the charge of the working state given, for a call that goes at p_go.
        v_fresh := p_fresh;
        v_act := 3;
    ELSE
        IF p_action <= 1 AND p_cost > (CASE WHEN a >= 5 THEN b ELSE n END) THEN
            -- Denied for good, nothing charged or delayed: how the key stands, and no wait.
            r := ratelimit.decide_state(a, n, p, b, ws, we, 0, p_state_algorithm, p_instant,
                                        p_amount, p_carry, p_log, p_blocked_until, p_now, 0, 1::smallint);
            r.allowed := false;
            r.retry_after := 0;
            r.never := true;
            r.changed := false;
            RETURN r;
        END IF;
        IF p_state_algorithm IS DISTINCT FROM a THEN
            -- Another algorithm's state reads as fresh; its block stays.
            v_fresh := true;
            o_state := ARRAY[p_instant, p_amount, p_carry];
            w_instant := 0;
            w_amount := 0;
            w_carry := 0;
            w_log := NULL;
            w_ml := NULL;
            w_mp := NULL;
        ELSIF a = 6 AND coalesce(w_ml, 0) = 0 THEN
            -- A 0.5.0 gcra state (its theoretical arrival time in instant, carry in 1/N µs) as
            -- the bucket it stands for now.
            o_state := ARRAY[p_instant, p_amount, p_carry];
            v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
            v_level := greatest(-v_most_owed::numeric * p,
                                b::numeric * p - greatest(0, p_instant::numeric * n + p_carry - p_now::numeric * n));
            v_whole := pg_catalog.div(v_level, p) - CASE WHEN v_level < 0 AND pg_catalog.mod(v_level, p) <> 0 THEN 1 ELSE 0 END;
            w_instant := p_now;
            w_amount := v_whole;
            w_carry := v_level - v_whole * p;
            w_ml := n;
            w_mp := p;
        END IF;
        v_act := CASE WHEN p_action = 0 AND p_now < w_blocked THEN 1 ELSE p_action END;
    END IF;

    -- The algorithm, on the working state: it changes the state only when it writes.
    IF a = 1 THEN
        -- fixed_window: at most N in each window aligned to the epoch, or in each calendar window
        -- (the caller gave the one holding now; a later t, a clock behind the state, takes the
        -- next to start at the state's window or this one's end).
        t := greatest(p_now, w_instant);
        IF we = 0 THEN
            w0 := t - t % p;
            e0 := w0 + p;
        ELSIF t < we THEN
            w0 := ws;
            e0 := we;
        ELSE
            w0 := greatest(w_instant, we);
            e0 := w0 + (we - ws);
        END IF;
        used := CASE WHEN w_instant = w0 THEN w_amount ELSE 0 END;
        IF w_carry = 0 AND v_act <> 3 THEN
            o_allowed := used + p_cost <= n;
            IF (v_act = 0 AND o_allowed AND p_cost > 0) OR v_act = 2 THEN
                used := CASE WHEN v_act = 0 THEN used + p_cost ELSE greatest(0, used - p_cost) END;
                w_instant := w0;
                w_amount := used;
            END IF;
            o_retry_at := e0;
        ELSE
            -- A charge may leave the window past N (carry 1): what is left of it after N a
            -- window counts in the windows after it (rounded to the nearest window: exact for
            -- aligned windows, right for calendar ones), at most what a key may owe.
            len := e0 - w0;
            v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
            IF w_carry <> 0 THEN
                IF w_instant < w0 THEN
                    v_windows := (w0 - w_instant + len / 2) / len;
                    used := CASE WHEN w_amount <= n OR v_windows < 1 THEN 0
                                 ELSE greatest(0, w_amount::numeric - v_windows::numeric * n)::bigint END;
                END IF;
                used := least(used, n + v_most_owed);
            END IF;
            o_allowed := used + p_cost <= n;
            IF (v_act = 0 AND o_allowed AND p_cost > 0) OR v_act = 2 OR (v_act = 3 AND p_cost > 0) THEN
                used := CASE WHEN v_act = 0 THEN used + p_cost WHEN v_act = 2 THEN greatest(0, used - p_cost)
                             ELSE least(used + p_cost, n + v_most_owed) END;
                w_instant := w0;
                w_amount := used;
                -- A charge marks a window left past N; any other write of N or less clears it.
                IF v_act = 3 OR w_carry <> 0 THEN
                    w_carry := CASE WHEN used > n THEN 1 ELSE 0 END;
                END IF;
            END IF;
            v_owing := w_carry <> 0 AND used > n;
            o_retry_at := e0 + CASE WHEN v_owing AND used - (n - p_cost) > n
                                    THEN ((used - (n - p_cost) + n - 1) / n - 1) * len ELSE 0 END;
            e0 := e0 + CASE WHEN v_owing AND used > n THEN ((used + n - 1) / n - 1) * len ELSE 0 END;
        END IF;
        o_remaining := greatest(0, n - used);
        o_reset_at := CASE WHEN used > 0 THEN e0 ELSE p_now END;
    ELSIF a = 2 THEN
        -- rolling_window: a window opens at the first call after the last one closed.
        t := greatest(p_now, w_instant);
        v_start := w_instant;
        used := w_amount;
        IF w_carry <> 0 THEN
            v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
            IF used > n AND t >= v_start + p THEN
                -- A window a charge left past N: its excess opens the windows after it, back
                -- to back, N a window.
                v_windows := (t - v_start) / p;
                used := CASE WHEN v_windows < 1 THEN 0
                             ELSE greatest(0, w_amount::numeric - v_windows::numeric * n)::bigint END;
                v_start := v_start + v_windows * p;
            END IF;
        END IF;
        v_active := used > 0 AND t < v_start + p;
        IF NOT v_active THEN
            used := 0;
        ELSIF w_carry <> 0 THEN
            used := least(used, n + v_most_owed);
        END IF;
        o_allowed := used + p_cost <= n;
        IF (v_act = 0 AND o_allowed AND p_cost > 0) OR (v_act = 3 AND p_cost > 0) THEN
            IF NOT v_active THEN
                v_start := t;
                v_active := true;
            END IF;
            IF v_act = 3 THEN
                v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
                used := least(used + p_cost, n + v_most_owed);
            ELSE
                used := used + p_cost;
            END IF;
            w_instant := v_start;
            w_amount := used;
        ELSIF v_act = 2 AND v_active THEN
            used := greatest(0, used - p_cost);
            w_instant := v_start;
            w_amount := used;
            v_active := used > 0;
        END IF;
        IF ((v_act = 0 AND o_allowed AND p_cost > 0) OR v_act = 2 OR (v_act = 3 AND p_cost > 0))
           AND (v_act = 3 OR w_carry <> 0) THEN
            w_carry := CASE WHEN used > n THEN 1 ELSE 0 END;
        END IF;
        IF w_carry <> 0 AND used > n THEN
            o_retry_at := v_start + (CASE WHEN used - (n - p_cost) <= n THEN 1
                                          ELSE (used - (n - p_cost) + n - 1) / n END) * p;
            o_reset_at := CASE WHEN v_active
                               THEN v_start + (CASE WHEN used <= n THEN 1 ELSE (used + n - 1) / n END) * p
                               ELSE p_now END;
        ELSE
            o_retry_at := v_start + p;
            o_reset_at := CASE WHEN v_active THEN v_start + p ELSE p_now END;
        END IF;
        o_remaining := greatest(0, n - used);
    ELSIF a = 3 THEN
        -- sliding_window: at most N in any span P, from a log of (instant, units) pairs.
        nl := coalesce(pg_catalog.array_length(w_log, 1), 0);
        t := CASE WHEN nl > 0 THEN greatest(p_now, w_instant, w_log[nl - 1]) ELSE greatest(p_now, w_instant) END;
        -- Entries at or before t - P no longer count; v_first is the instant of the first
        -- entry that does.
        v_first := 1;
        WHILE v_first < nl AND w_log[v_first] <= t - p LOOP
            v_first := v_first + 2;
        END LOOP;
        used := 0;
        i := v_first + 1;
        WHILE i <= nl LOOP
            used := used + w_log[i];
            i := i + 2;
        END LOOP;
        o_allowed := used + p_cost <= n;
        IF (v_act = 0 AND o_allowed AND p_cost > 0) OR v_act = 2 OR (v_act = 3 AND p_cost > 0) THEN
            w_instant := t;
            IF v_first > 1 THEN
                w_log := w_log[v_first:nl];
                nl := nl - v_first + 1;
            END IF;
            IF v_act = 0 THEN
                used := used + p_cost;
                IF nl > 0 AND w_log[nl - 1] = t THEN
                    w_log[nl] := w_log[nl] + p_cost;
                ELSE
                    w_log := coalesce(w_log, '{}') || ARRAY[t, p_cost];
                    nl := nl + 2;
                END IF;
            ELSIF v_act = 3 THEN
                -- Units of one entry beyond N change no decision: an entry keeps at most N.
                IF nl = 0 OR w_log[nl - 1] <> t THEN
                    w_log := coalesce(w_log, '{}') || ARRAY[t, 0::bigint];
                    nl := nl + 2;
                END IF;
                v_added := least(p_cost, greatest(0, n - w_log[nl]));
                w_log[nl] := w_log[nl] + v_added;
                used := used + v_added;
            ELSE
                v_return := p_cost;
                WHILE v_return > 0 AND nl > 0 LOOP
                    v_taken := least(v_return, w_log[nl]);
                    w_log[nl] := w_log[nl] - v_taken;
                    v_return := v_return - v_taken;
                    used := used - v_taken;
                    IF w_log[nl] = 0 THEN
                        w_log := w_log[1:nl - 2];
                        nl := nl - 2;
                    END IF;
                END LOOP;
            END IF;
            IF nl > 128 THEN
                -- More than 64 entries: merged within cells of ceil(P / 63) µs (algorithms.hpp).
                v_cell := (p + 62) / 63;
                IF nl > 256 THEN
                    -- A log longer than twice the bound: every cell collapsed into its latest
                    -- entry in one pass.
                    v_kept := ARRAY[w_log[1], w_log[2]];
                    j := 2;
                    i := 3;
                    WHILE i < nl LOOP
                        IF (CASE WHEN v_kept[j - 1] >= 0 THEN v_kept[j - 1] / v_cell ELSE -((-v_kept[j - 1] + v_cell - 1) / v_cell) END)
                           = (CASE WHEN w_log[i] >= 0 THEN w_log[i] / v_cell ELSE -((-w_log[i] + v_cell - 1) / v_cell) END) THEN
                            v_kept[j - 1] := w_log[i];
                            v_kept[j] := v_kept[j] + w_log[i + 1];
                        ELSE
                            v_kept := v_kept || ARRAY[w_log[i], w_log[i + 1]];
                            j := j + 2;
                        END IF;
                        i := i + 2;
                    END LOOP;
                    w_log := v_kept;
                    nl := j;
                END IF;
                WHILE nl > 128 LOOP
                    -- The same-cell pair that moves the fewest unit-microseconds (the oldest on
                    -- a tie); the oldest pair if there is none.
                    v_best := 0;
                    i := 1;
                    WHILE i + 2 < nl LOOP
                        IF (CASE WHEN w_log[i] >= 0 THEN w_log[i] / v_cell ELSE -((-w_log[i] + v_cell - 1) / v_cell) END)
                           = (CASE WHEN w_log[i + 2] >= 0 THEN w_log[i + 2] / v_cell ELSE -((-w_log[i + 2] + v_cell - 1) / v_cell) END) THEN
                            v_moved := (w_log[i + 2] - w_log[i])::numeric * w_log[i + 1];
                            IF v_best = 0 OR v_moved < v_best_moved THEN
                                v_best := i;
                                v_best_moved := v_moved;
                            END IF;
                        END IF;
                        i := i + 2;
                    END LOOP;
                    IF v_best = 0 THEN
                        v_best := 1;
                    END IF;
                    w_log[v_best + 3] := w_log[v_best + 3] + w_log[v_best + 1];
                    w_log := w_log[1:v_best - 1] || w_log[v_best + 2:nl];
                    nl := nl - 2;
                END LOOP;
            END IF;
            v_first := 1;
        END IF;
        o_remaining := greatest(0, n - used);
        IF NOT o_allowed THEN
            -- The call fits once enough of the oldest entries have left the window.
            o_retry_at := 0;
            v_still := used;
            i := v_first;
            WHILE i < nl LOOP
                v_still := v_still - w_log[i + 1];
                IF v_still + p_cost <= n THEN
                    o_retry_at := w_log[i] + p;
                    EXIT;
                END IF;
                i := i + 2;
            END LOOP;
        END IF;
        o_reset_at := CASE WHEN used > 0 THEN w_log[nl - 1] + p ELSE p_now END;
    ELSIF a = 4 THEN
        -- sliding_window_counter: this window's units and the previous window's, weighted by
        -- the part of it still inside the sliding span, scaled by P.
        t := greatest(p_now, w_instant);
        w0 := t - t % p;
        cur := CASE WHEN w_instant = w0 THEN w_amount ELSE 0 END;
        prev := CASE WHEN w_instant = w0 THEN w_carry WHEN w_instant = w0 - p THEN w_amount ELSE 0 END;
        v_elapsed := t - w0;
        v_cap := n::numeric * p;
        o_allowed := prev::numeric * (p - v_elapsed) + (cur + p_cost)::numeric * p <= v_cap;
        IF (v_act = 0 AND o_allowed AND p_cost > 0) OR v_act = 2 OR (v_act = 3 AND p_cost > 0) THEN
            IF v_act = 3 THEN
                -- A charge may leave the window past N: next window, its units weigh as the
                -- previous window's.
                v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
                cur := least(cur + p_cost, n + v_most_owed);
            ELSE
                cur := CASE WHEN v_act = 0 THEN cur + p_cost ELSE greatest(0, cur - p_cost) END;
            END IF;
            w_instant := w0;
            w_amount := cur;
            w_carry := prev;
        END IF;
        o_remaining := greatest(0, pg_catalog.div(v_cap - prev::numeric * (p - v_elapsed) - cur::numeric * p, p))::bigint;
        IF NOT o_allowed AND v_act <= 1 THEN
            -- In this window once enough of the previous one has slid out, or in the next,
            -- where this window's units weigh as the previous.
            o_retry_at := CASE WHEN cur + p_cost <= n
                               THEN w0 + p - pg_catalog.div((n - cur - p_cost)::numeric * p, prev)::bigint
                               ELSE w0 + p + p - pg_catalog.div((n - p_cost)::numeric * p, cur)::bigint END;
        END IF;
        o_reset_at := CASE WHEN cur > 0 THEN w0 + 2 * p WHEN prev > 0 THEN w0 + p ELSE p_now END;
    ELSE
        -- token_bucket and gcra: B tokens refilled at N per P; whole tokens in amount, the
        -- fraction of the next one in carry (1/P). A state measured under another N or P keeps
        -- its whole tokens up to the new burst, its fraction rescaled rounding down.
        IF v_fresh THEN
            t := p_now;
            v_tokens := b;
            v_fraction := 0;
        ELSE
            IF (CASE WHEN w_ml > 0 THEN w_ml ELSE n END) = n AND (CASE WHEN w_mp > 0 THEN w_mp ELSE p END) = p THEN
                v_total := w_carry::numeric + (greatest(p_now, w_instant) - w_instant)::numeric * n;
                v_stored := w_amount;
            ELSIF w_amount >= b THEN
                v_total := (greatest(p_now, w_instant) - w_instant)::numeric * n;
                v_stored := b;
            ELSE
                v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
                IF w_amount < -v_most_owed THEN
                    -- A debt charged under a faster limit, kept only up to what this one works
                    -- off in a year (the core's bucket_level).
                    v_total := (greatest(p_now, w_instant) - w_instant)::numeric * n;
                    v_stored := -v_most_owed;
                ELSE
                    v_total := pg_catalog.div(w_carry::numeric * p, CASE WHEN w_mp > 0 THEN w_mp ELSE p END)
                               + (greatest(p_now, w_instant) - w_instant)::numeric * n;
                    v_stored := w_amount;
                END IF;
            END IF;
            t := greatest(p_now, w_instant);
            IF v_stored + pg_catalog.div(v_total, p) >= b THEN
                v_tokens := b;
                v_fraction := 0;
            ELSE
                v_tokens := v_stored + pg_catalog.div(v_total, p);
                v_fraction := pg_catalog.mod(v_total, p);
            END IF;
        END IF;
        o_allowed := v_tokens >= p_cost;
        IF v_act = 0 AND o_allowed AND p_cost > 0 THEN
            v_tokens := v_tokens - p_cost;
            w_instant := t;
            w_amount := v_tokens;
            w_carry := v_fraction;
            w_ml := n;
            w_mp := p;
        ELSIF v_act = 2 OR (v_act = 3 AND p_cost > 0) THEN
            IF v_act = 2 THEN
                IF v_tokens::numeric + p_cost >= b THEN
                    v_tokens := b;
                    v_fraction := 0;
                ELSE
                    v_tokens := v_tokens + p_cost;
                END IF;
            ELSE
                -- Charged whatever is left: the bucket goes into debt, repaid by the refill. A
                -- call that goes later also gives up what the bucket would refill past full by
                -- then.
                v_level := v_tokens::numeric * p + v_fraction - p_cost::numeric * p;
                IF p_go > t THEN
                    v_past := v_tokens::numeric * p + v_fraction + (p_go - t)::numeric * n - b::numeric * p;
                    IF v_past > 0 THEN
                        v_level := v_level - v_past;
                    END IF;
                END IF;
                v_whole := pg_catalog.div(v_level, p) - CASE WHEN v_level < 0 AND pg_catalog.mod(v_level, p) <> 0 THEN 1 ELSE 0 END;
                v_most_owed := least(pg_catalog.div(n::numeric * 31536000000000, p), 1099511627776)::bigint;
                o_cut := v_whole < -v_most_owed;
                IF o_cut THEN
                    v_tokens := -v_most_owed;
                ELSE
                    v_tokens := v_whole;
                    v_fraction := v_level - v_whole * p;
                END IF;
            END IF;
            w_instant := t;
            w_amount := v_tokens;
            w_carry := v_fraction;
            w_ml := n;
            w_mp := p;
        END IF;
        o_remaining := greatest(0, v_tokens);
        -- The time the missing tokens take to drip in at N per P, rounded up.
        IF NOT o_allowed THEN
            v_missing := (p_cost - v_tokens)::numeric * p - v_fraction;
            o_retry_at := t + CASE WHEN v_missing <= 0 THEN 0 ELSE pg_catalog.div(v_missing + n - 1, n)::bigint END;
        END IF;
        v_missing := (b - v_tokens)::numeric * p - v_fraction;
        o_reset_at := CASE WHEN v_tokens >= b THEN p_now
                           ELSE t + CASE WHEN v_missing <= 0 THEN 0 ELSE pg_catalog.div(v_missing + n - 1, n)::bigint END END;
    END IF;

    IF p_action = 0 AND v_act = 0 AND o_allowed AND p_cost > 0 THEN
        -- An allowed consume: the state written, the decision the algorithm's.
        NULL;
    ELSIF p_action <= 1 THEN
        IF p_now < w_blocked THEN
            -- Nothing changes while blocked: the waits are the block's rest plus what the key
            -- will say when it ends.
            IF v_fresh THEN
                r := ratelimit.decide_state(a, n, p, b, ws, we, 0, 0::smallint, 0, 0, 0, NULL, 0,
                                            w_blocked, p_cost, 1::smallint);
            ELSE
                r := ratelimit.decide_state(a, n, p, b, ws, we, 0, a, w_instant, w_amount, w_carry,
                                            CASE WHEN a >= 5 THEN CASE WHEN w_ml > 0 THEN ARRAY[w_ml, w_mp] END
                                                 WHEN pg_catalog.array_length(w_log, 1) > 0 THEN w_log END,
                                            0, w_blocked, p_cost, 1::smallint);
            END IF;
            RETURN ROW(false, CASE WHEN a >= 5 THEN b ELSE n END, 0,
                       w_blocked - p_now + r.retry_after, w_blocked - p_now + r.reset_after,
                       true, false, false, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
        END IF;
        IF NOT o_allowed AND p_cost > 0 AND p_max_delay > 0 AND a >= 5 AND o_retry_at - p_now <= p_max_delay THEN
            -- Admitted for later instead of denied (a bucket's delay): the cost charged at
            -- once, with what the bucket would refill past full before the call goes, unless
            -- the charge would be cut (then the call is denied as it was).
            r := ratelimit.decide_state(a, n, p, b, ws, we, p_max_delay, a, w_instant, w_amount, w_carry,
                                        CASE WHEN w_ml > 0 THEN ARRAY[w_ml, w_mp] END, w_blocked,
                                        p_now, p_cost, 4::smallint, coalesce(v_fresh, false), o_retry_at);
            IF NOT r.cut THEN
                w_instant := r.instant;
                w_amount := r.amount;
                w_carry := r.carry;
                w_ml := n;
                w_mp := p;
                -- The waits after the charge: reset_after is what a one-unit peek says.
                r := ratelimit.decide_state(a, n, p, b, ws, we, 0, a, w_instant, w_amount, w_carry,
                                            ARRAY[n, p], w_blocked, p_now, 1, 1::smallint);
                IF p_action = 1 THEN
                    RETURN ROW(true, r."limit", 0, o_retry_at - p_now, r.reset_after, false, false, false, false,
                               NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
                END IF;
                d_allowed := true;
                d_remaining := 0;
                d_retry := o_retry_at - p_now;
                d_reset := r.reset_after;
                d_blocked := false;
            END IF;
        END IF;
        IF d_allowed IS NULL THEN
            -- Nothing written. A call of no units takes nothing, so it fits whenever the key
            -- is not blocked.
            RETURN ROW(o_allowed OR p_cost = 0, CASE WHEN a >= 5 THEN b ELSE n END, o_remaining,
                       CASE WHEN o_allowed OR p_cost = 0 THEN 0 ELSE greatest(0, o_retry_at - p_now) END,
                       greatest(0, o_reset_at - p_now),
                       false, false, false, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
        END IF;
    ELSIF p_action = 4 THEN
        RETURN ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, coalesce(o_cut, false), a, w_instant, w_amount, w_carry,
                   CASE WHEN w_ml > 0 THEN ARRAY[w_ml, w_mp] END, w_blocked, NULL, NULL)::ratelimit.state_decision;
    ELSIF p_action = 3 AND p_cost = 0 THEN
        -- A charge of nothing writes nothing: a one-unit peek of the key as it stood.
        r := ratelimit.decide_state(a, n, p, b, ws, we, 0, p_state_algorithm,
                                    coalesce(o_state[1], p_instant), coalesce(o_state[2], p_amount),
                                    coalesce(o_state[3], p_carry), p_log, p_blocked_until, p_now, 1, 1::smallint);
        r.changed := false;
        RETURN r;
    ELSE
        -- A refund or a charge reports what a one-unit peek says afterwards.
        r := ratelimit.decide_state(a, n, p, b, ws, we, 0, a, w_instant, w_amount, w_carry,
                                    CASE WHEN a >= 5 THEN CASE WHEN w_ml > 0 THEN ARRAY[w_ml, w_mp] END
                                         WHEN pg_catalog.array_length(w_log, 1) > 0 THEN w_log END,
                                    w_blocked, p_now, 1, 1::smallint);
        d_allowed := r.allowed;
        d_remaining := r.remaining;
        d_retry := r.retry_after;
        d_reset := r.reset_after;
        d_blocked := r.blocked;
    END IF;

    -- The state written, and from when it decides like a fresh key (idle_from): a cleanup may
    -- delete the row then. Calls behind the clock are decided at the state's latest instant.
    -- (A bucket written here is measured, never a 0.5.0 arrival time.)
    IF a = 1 THEN
        -- A charge's excess counts in the windows after it, calendar windows counted twice as
        -- long as the current one, longer than any that follows.
        v_idle := CASE WHEN w_carry <> 0 AND w_amount > n
                       THEN w_instant + (CASE WHEN we <> 0 THEN 2 ELSE 1 END) * ((w_amount + n - 1) / n) * p
                       WHEN we <> 0 AND w_amount > 0
                       THEN CASE WHEN w_instant = ws THEN we WHEN w_instant < ws THEN w_instant
                                 ELSE w_instant + 2 * (we - ws) END
                       WHEN w_amount > 0 THEN w_instant + p ELSE 0 END;
    ELSIF a = 2 THEN
        v_idle := CASE WHEN w_carry <> 0 AND w_amount > n THEN w_instant + ((w_amount + n - 1) / n) * p
                       WHEN w_amount > 0 THEN w_instant + p ELSE 0 END;
    ELSIF a = 3 THEN
        v_idle := CASE WHEN pg_catalog.array_length(w_log, 1) > 0 THEN w_log[pg_catalog.array_length(w_log, 1) - 1] + p ELSE 0 END;
    ELSIF a = 4 THEN
        v_idle := CASE WHEN w_amount > 0 THEN w_instant + 2 * p WHEN w_carry > 0 THEN w_instant + p ELSE 0 END;
    ELSE
        v_missing := (b - w_amount)::numeric * p - w_carry;
        v_idle := CASE WHEN v_missing <= 0 THEN 0 ELSE w_instant + pg_catalog.div(v_missing + n - 1, n)::bigint END;
    END IF;
    RETURN ROW(coalesce(d_allowed, true), CASE WHEN a >= 5 THEN b ELSE n END, coalesce(d_remaining, o_remaining),
               coalesce(d_retry, 0), coalesce(d_reset, greatest(0, o_reset_at - p_now)), coalesce(d_blocked, false),
               false, true, false, a, w_instant, w_amount, w_carry,
               CASE WHEN a >= 5 THEN CASE WHEN w_ml > 0 THEN ARRAY[w_ml, w_mp] END
                    WHEN pg_catalog.array_length(w_log, 1) > 0 THEN w_log END,
               w_blocked, greatest(v_idle, w_instant, w_blocked), NULL)::ratelimit.state_decision;
END
$$;

------------------------------------------------------------------------------------------------
-- Arguments, checked as the C edition checks them (src/core/validation.cpp, limit_checks.cpp,
-- src/pg/bridge/arguments.cpp): 22004 for a NULL, 22023 otherwise, the message naming the
-- argument as the caller spells it (p_period, or p_periods[3] for an array's element).
------------------------------------------------------------------------------------------------

-- A name the caller gave, as the messages quote it: its first 64 bytes (whole characters).
CREATE FUNCTION ratelimit.quoted_name(p_name text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    v_chars integer := 64;
BEGIN
    WHILE pg_catalog.octet_length(pg_catalog.left(p_name, v_chars)) > 64 LOOP
        v_chars := v_chars - 1;
    END LOOP;
    RETURN pg_catalog.left(p_name, v_chars);
END
$$;

-- Raises the error for a key that is NULL, empty or longer than 256 bytes (require_key);
-- p_argument names it (p_key, p_keys[7]). Called for such a key only.
CREATE FUNCTION ratelimit.refuse_key(p_argument text, p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_argument USING ERRCODE = 'null_value_not_allowed';
    ELSIF pg_catalog.octet_length(p_key) = 0 THEN
        RAISE EXCEPTION '% must not be empty', p_argument USING ERRCODE = 'invalid_parameter_value';
    ELSIF pg_catalog.octet_length(p_key) > 256 THEN
        RAISE EXCEPTION '% must be at most 256 bytes long, got %', p_argument, pg_catalog.octet_length(p_key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The memory engine keeps its counters in the server's shared memory, which only a library
-- loaded at server start can set up: the SQL edition has none.
CREATE FUNCTION ratelimit.refuse_memory_engine(p_argument text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION '% "memory" is not in the SQL edition of ratelimit: the memory engine is the C edition''s (CREATE EXTENSION ratelimit)', p_argument
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'The memory engine keeps its counters in shared memory, which only a library loaded at server start can set up.',
              HINT = 'Use the engine table or unlogged, or move to the C edition: docs/sql-edition.md says how.';
END
$$;

-- A span as microseconds (interval_argument): not NULL, finite, no months, more than zero and at
-- most 365 days. p_argument names it in the errors.
CREATE FUNCTION ratelimit.interval_micros(p_argument text, p_span interval)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_total numeric;
    v_days numeric;
BEGIN
    IF p_span IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- From PostgreSQL 17 'infinity' and '-infinity' are intervals.
    IF NOT pg_catalog.isfinite(p_span) THEN
        RAISE EXCEPTION '% must be finite', p_argument USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF extract(year FROM p_span) <> 0 OR extract(month FROM p_span) <> 0 THEN
        RAISE EXCEPTION '% must not use months or years, whose length varies (use days)', p_argument
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_days := extract(day FROM p_span);
    v_total := v_days * 86400000000 + extract(hour FROM p_span) * 3600000000
               + extract(minute FROM p_span) * 60000000 + extract(microseconds FROM p_span);
    -- The days in microseconds, and their sum with the time, must fit 64 bits.
    IF v_days > 106751991 OR v_days < -106751991 OR v_total < -9223372036854775808 OR v_total > 31536000000000 THEN
        RAISE EXCEPTION '% must be at most 365 days', p_argument USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_total <= 0 THEN
        RAISE EXCEPTION '% must be greater than zero', p_argument USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v_total;
END
$$;

-- p_max_wait of consume (Limit::max_delay) as microseconds: NULL or a zero span, no delay; a
-- negative one refused with its own message; else a span as interval_micros reads it, and only
-- for token_bucket and gcra (algorithm 5 and 6).
CREATE FUNCTION ratelimit.max_wait_micros(p_max_wait interval, p_algorithm smallint)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_length numeric;
    v_delay bigint;
BEGIN
    IF p_max_wait IS NULL THEN
        RETURN 0;
    END IF;
    IF pg_catalog.isfinite(p_max_wait) AND extract(year FROM p_max_wait) = 0
       AND extract(month FROM p_max_wait) = 0 THEN
        v_length := extract(day FROM p_max_wait) * 86400000000
                    + extract(hour FROM p_max_wait) * 3600000000
                    + extract(minute FROM p_max_wait) * 60000000
                    + extract(microseconds FROM p_max_wait);
        IF v_length = 0 THEN
            RETURN 0;
        END IF;
        IF v_length < 0 THEN
            RAISE EXCEPTION 'p_max_wait must not be negative (NULL or ''0'' for no delay)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    v_delay := ratelimit.interval_micros('p_max_wait', p_max_wait);
    -- A window algorithm would count a delayed call in the window it was asked in.
    IF p_algorithm < 5 THEN
        RAISE EXCEPTION 'p_max_wait applies only to token_bucket and gcra (got %)',
            (ARRAY['fixed_window', 'rolling_window', 'sliding_window', 'sliding_window_counter'])[p_algorithm]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v_delay;
END
$$;

-- Whether p_zone names a time zone as the C edition finds one (pg_tzset, by name or POSIX
-- rule). Most names are tried as the session's TimeZone, which is pg_tzset itself and never an
-- abbreviation (AT TIME ZONE tries abbreviations first: PST, or CET as a fixed offset); the
-- few names the TimeZone setting reads otherwise (a number of hours, "interval ...", a zone
-- with leap seconds) go to AT TIME ZONE, which reads them with pg_tzset. The setting changed
-- here is this function's own (its SET clause restores it).
CREATE FUNCTION ratelimit.time_zone_known(p_zone text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET TimeZone = 'UTC'
AS $$
BEGIN
    IF pg_catalog.octet_length(p_zone) NOT BETWEEN 1 AND 255 THEN
        RETURN false;
    END IF;
    BEGIN
        IF ratelimit.zone_by_at_time_zone(p_zone) THEN
            PERFORM pg_catalog.timezone(p_zone, pg_catalog.now());
        ELSE
            PERFORM pg_catalog.set_config('TimeZone', p_zone, true);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RETURN false;
    END;
    RETURN true;
END
$$;

-- The names the TimeZone setting reads otherwise than pg_tzset (see time_zone_known): what
-- strtod reads whole, a name that starts with "interval", a zone of right/ (leap seconds).
CREATE FUNCTION ratelimit.zone_by_at_time_zone(p_zone text)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT p_zone COLLATE "C" OPERATOR(pg_catalog.~*) '^(interval|right/)'
        OR p_zone COLLATE "C" OPERATOR(pg_catalog.~*)
           '^[[:space:]]*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|0x([0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(p[+-]?[0-9]+)?|inf|infinity|nan(\([0-9a-z_]*\))?)$'
$$;

-- The calendar window holding p_now (Unix µs) in zone p_zone (NULL: UTC): p_calendar 1 a day,
-- 2 an ISO week from Monday, 3 a month, from one local midnight to the next, as
-- src/pg/bridge/calendar_window.cpp computes it. ARRAY[start, end] in Unix µs. A midnight
-- that daylight saving time skips is the instant of the change; one it makes happen twice is
-- the first of the two. p_zone must have passed time_zone_known.
CREATE FUNCTION ratelimit.calendar_window(p_calendar smallint, p_zone text, p_now bigint)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_at constant timestamptz := timestamptz '1970-01-01 00:00:00+00'
                                 + (p_now / 1000000) * interval '1 second'
                                 + (p_now % 1000000) * interval '1 microsecond';
    v_by_name boolean := false;  -- read with AT TIME ZONE p_zone, else as the session's zone
    v_local timestamp;
    v_first date;
    v_next date;
    v_day date;
    v_bounds bigint[] := '{}';
    v_midnight timestamp;
    v_result timestamptz;
    v_before timestamptz;
    v_offset interval;
    v_offset_before interval;
    v_earlier timestamptz;
BEGIN
    IF p_zone IS NULL THEN
        v_local := pg_catalog.timezone('UTC', v_at);
    ELSIF ratelimit.zone_by_at_time_zone(p_zone) THEN
        v_by_name := true;
        v_local := pg_catalog.timezone(p_zone, v_at);
    ELSE
        PERFORM pg_catalog.set_config('TimeZone', p_zone, true);
        v_local := v_at::timestamp;
    END IF;
    v_first := v_local::date;
    v_next := v_first + 1;
    IF p_calendar = 2 THEN
        v_first := v_first - (extract(isodow FROM v_first)::integer - 1);
        v_next := v_first + 7;
    ELSIF p_calendar = 3 THEN
        v_first := pg_catalog.date_trunc('month', v_local)::date;
        v_next := (v_first + interval '1 month')::date;
    END IF;
    FOREACH v_day IN ARRAY ARRAY[v_first, v_next] LOOP
        v_midnight := v_day::timestamp;
        IF p_zone IS NULL THEN
            v_result := pg_catalog.timezone('UTC', v_midnight);
        ELSE
            -- Local midnight at the offset in force then; the same midnight at the offset in
            -- force just before it, if earlier and the clock does read midnight then.
            v_result := CASE WHEN v_by_name THEN pg_catalog.timezone(p_zone, v_midnight) ELSE v_midnight::timestamptz END;
            v_offset := v_midnight - pg_catalog.timezone('UTC', v_result);
            v_before := v_result - interval '1 microsecond';
            v_offset_before := CASE WHEN v_by_name THEN pg_catalog.timezone(p_zone, v_before) ELSE v_before::timestamp END
                               - pg_catalog.timezone('UTC', v_before);
            IF v_offset_before <> v_offset THEN
                v_earlier := pg_catalog.timezone('UTC', v_midnight - v_offset_before);
                IF v_earlier < v_result
                   AND (CASE WHEN v_by_name THEN pg_catalog.timezone(p_zone, v_earlier) ELSE v_earlier::timestamp END) = v_midnight THEN
                    v_result := v_earlier;
                END IF;
            END IF;
        END IF;
        v_bounds := v_bounds || (extract(epoch FROM v_result) * 1000000)::bigint;
    END LOOP;
    RETURN v_bounds;
END
$$;

-- A limit's arguments checked in the C edition's order (read_limit and validate_limit of
-- src/pg/native/native_api.cpp, make_limit and require_valid_limit of the core): p_limit,
-- p_period (a span, or with p_time_zone or months a calendar period), p_cost when p_with_cost
-- (its NULL here, its sign after the limit), p_algorithm, p_engine, p_burst, p_time_zone.
-- p_engine 'memory' passes: the callers refuse it where the C edition would find the engine
-- missing (refuse_memory_engine). Returns the limit; a calendar period has its usual length (a
-- day, 7 days, 31 days) until limit_at gives the call's window.
CREATE FUNCTION ratelimit.checked_limit(
    p_limit integer,
    p_period interval,
    p_algorithm text,
    p_engine text,
    p_burst integer,
    p_time_zone text,
    p_cost integer,
    p_with_cost boolean)
RETURNS ratelimit.limit_values
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_zone_given constant boolean := p_time_zone IS NOT NULL;
    v_months numeric;
    v_days numeric;
    v_micros numeric;
    v_calendar smallint := 0;
    v_period bigint;
    v_algorithm smallint;
    v_burst bigint;
BEGIN
    IF p_limit IS NULL THEN
        RAISE EXCEPTION 'p_limit must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_period IS NULL OR (NOT v_zone_given AND pg_catalog.isfinite(p_period)
                            AND extract(year FROM p_period) = 0
                            AND extract(month FROM p_period) = 0) THEN
        v_period := ratelimit.interval_micros('p_period', p_period);
    ELSE
        IF NOT pg_catalog.isfinite(p_period) THEN
            RAISE EXCEPTION 'p_period must be finite' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_months := extract(year FROM p_period) * 12 + extract(month FROM p_period);
        v_days := extract(day FROM p_period);
        v_micros := extract(hour FROM p_period) * 3600000000
                    + extract(minute FROM p_period) * 60000000
                    + extract(microseconds FROM p_period);
        IF v_micros = 0 AND v_months = 0 AND v_days = 1 AND v_zone_given THEN
            v_calendar := 1;
            v_period := 86400000000;
        ELSIF v_micros = 0 AND v_months = 0 AND v_days = 7 AND v_zone_given THEN
            v_calendar := 2;
            v_period := 604800000000;
        ELSIF v_micros = 0 AND v_months = 1 AND v_days = 0 THEN
            v_calendar := 3;
            v_period := 2678400000000;
        ELSIF v_zone_given THEN
            RAISE EXCEPTION 'p_period must be ''1 day'', ''1 week'' or ''1 month'' with p_time_zone (a calendar window from local midnight)'
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE EXCEPTION 'p_period may use months only as ''1 month'' (the calendar month, in UTC unless p_time_zone is given)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_with_cost AND p_cost IS NULL THEN
        RAISE EXCEPTION 'p_cost must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_algorithm IS NULL THEN
        RAISE EXCEPTION 'p_algorithm must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_algorithm := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
                                    WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4
                                    WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    IF v_algorithm IS NULL THEN
        RAISE EXCEPTION 'p_algorithm must be one of fixed_window, rolling_window, sliding_window, sliding_window_counter, token_bucket, gcra (got "%")',
            ratelimit.quoted_name(p_algorithm) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_calendar <> 0 AND v_algorithm <> 1 THEN
        RAISE EXCEPTION 'p_algorithm must be fixed_window for a calendar period: calendar windows need fixed_window (got %)',
            p_algorithm USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine IS NULL THEN
        RAISE EXCEPTION 'p_engine must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_engine NOT IN ('table', 'unlogged', 'memory') THEN
        RAISE EXCEPTION 'p_engine must be one of table, unlogged, memory (got "%")',
            ratelimit.quoted_name(p_engine) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_burst IS NOT NULL AND v_algorithm < 5 THEN
        RAISE EXCEPTION 'p_burst applies only to token_bucket and gcra' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_burst := coalesce(p_burst, p_limit);
    IF p_limit <= 0 THEN
        RAISE EXCEPTION 'p_limit must be greater than zero, got %', p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_period < 1000 THEN
        RAISE EXCEPTION 'p_period must be at least 1 millisecond' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_burst <= 0 THEN
        RAISE EXCEPTION 'p_burst must be greater than zero, got %', v_burst USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- An empty bucket refills in B·P/N: at most 365 days keeps every instant a bucket stores
    -- within a year of now.
    IF v_burst::numeric * v_period > p_limit::numeric * 31536000000000 THEN
        RAISE EXCEPTION 'p_burst is too large: refilling it (p_burst * p_period / p_limit) must take at most 365 days'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_with_cost AND p_cost < 0 THEN
        RAISE EXCEPTION 'p_cost must not be negative (got %)', p_cost USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_zone_given AND NOT ratelimit.time_zone_known(p_time_zone) THEN
        -- An abbreviation stands for an offset (and several zones), not for a zone whose
        -- midnights and daylight saving a calendar window can follow.
        RAISE EXCEPTION 'p_time_zone must name a time zone PostgreSQL knows, such as Europe/Berlin or UTC (got "%"%)',
            ratelimit.quoted_name(p_time_zone),
            CASE WHEN p_time_zone COLLATE "C" ~ '^[A-Z]{2,6}$'
                 THEN ': an abbreviation is not a zone; give its full name, such as America/Los_Angeles for PST (see pg_timezone_names)'
                 ELSE '' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ROW(v_algorithm, p_limit, v_period, v_burst, 0, 0, 0, v_calendar, p_time_zone)::ratelimit.limit_values;
END
$$;

-- The limit of a call at p_now: a calendar period gets the window holding p_now, and its length
-- as the period.
CREATE FUNCTION ratelimit.limit_at(p_limit ratelimit.limit_values, p_now bigint)
RETURNS ratelimit.limit_values
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l ratelimit.limit_values := p_limit;
    v_window bigint[];
BEGIN
    IF l.calendar <> 0 THEN
        v_window := ratelimit.calendar_window(l.calendar, l.time_zone, p_now);
        l.window_start := v_window[1];
        l.window_end := v_window[2];
        l.period := v_window[2] - v_window[1];
    END IF;
    RETURN l;
END
$$;

-- The limit of checked arguments (key_decide's and decide_tiers'), at p_now: what
-- checked_limit returns for them, without checking again.
CREATE FUNCTION ratelimit.limit_of(
    p_limit integer,
    p_period interval,
    p_algorithm text,
    p_burst integer,
    p_time_zone text,
    p_max_wait interval,
    p_now bigint)
RETURNS ratelimit.limit_values
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l ratelimit.limit_values;
    v_months numeric := extract(month FROM p_period);
BEGIN
    l.algorithm := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
                                    WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4
                                    WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    l."limit" := p_limit;
    l.burst := coalesce(p_burst, p_limit);
    l.window_start := 0;
    l.window_end := 0;
    l.max_delay := CASE WHEN p_max_wait IS NULL THEN 0
                        ELSE (extract(epoch FROM p_max_wait) * 1000000)::bigint END;
    l.time_zone := p_time_zone;
    IF p_time_zone IS NULL AND v_months = 0 THEN
        l.calendar := 0;
        l.period := (extract(epoch FROM p_period) * 1000000)::bigint;
        RETURN l;
    END IF;
    l.calendar := CASE WHEN v_months = 1 THEN 3 WHEN extract(day FROM p_period) = 7 THEN 2 ELSE 1 END;
    RETURN ratelimit.limit_at(l, p_now);
END
$$;

------------------------------------------------------------------------------------------------
-- The table engines: one row per (policy, key) in ratelimit.key_state or key_state_unlogged.
------------------------------------------------------------------------------------------------

-- Reads the key's row, decides with decide_state and writes the state when it changed, until
-- the write lands on the version read (the concurrency rules at the top of this file).
-- p_action: 0 consume, 1 peek, 2 refund, 3 charge; 5, for a tier of an all-or-nothing
-- decision: a peek, and if it allows, a consume of the same version, the peek in `before`; 6,
-- a consume whose caller already tried the one statement below (ratelimit.consume).
-- p_engine 'table' or 'unlogged'; the limit as limit_at returns it.
CREATE FUNCTION ratelimit.key_apply(
    p_engine text,
    p_space text,
    p_key text,
    p_algorithm smallint,
    p_limit bigint,
    p_period bigint,
    p_burst bigint,
    p_window_start bigint,
    p_window_end bigint,
    p_max_delay bigint,
    p_cost bigint,
    p_action smallint,
    p_now bigint)
RETURNS ratelimit.state_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_locked boolean;
    v_ctid tid;
    v_xmin xid;
    s_algorithm smallint;
    s_instant bigint;
    s_amount bigint;
    s_carry bigint;
    s_log bigint[];
    s_blocked bigint;
    r ratelimit.state_decision;
    v_before ratelimit.state_decision;
BEGIN
    IF p_action = 0 AND p_window_end = 0 AND p_cost > 0
       AND p_cost <= (CASE WHEN p_algorithm >= 5 THEN p_burst ELSE p_limit END) THEN
        -- The usual consume of a key its algorithm already keeps, not blocked, and allowed:
        -- decided and written by one statement, which READ COMMITTED evaluates again on the
        -- latest version when another transaction changed the row meanwhile, so it stays
        -- exact; the decision and state are the ones decide_state makes for it. Then a key
        -- without a row, whose consume is as simple: its row inserted, unless another
        -- transaction's is there first. Anything else (a denial, a charge's carry, a clock
        -- behind the state, another algorithm's state, a bucket measured under another limit,
        -- a sliding_window log) takes the way below.
        IF p_algorithm = 1 THEN
            -- The window holding now. A row whose window starts later (the clock went back)
            -- takes the way below; for the others greatest(now, instant) is now.
            s_instant := p_now - p_now % p_period;
            IF p_engine = 'table' THEN
                UPDATE ratelimit.key_state
                SET instant = s_instant,
                    amount = (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost,
                    expires_at = greatest(s_instant + p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 1 AND carry = 0 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost <= p_limit
                RETURNING amount INTO s_amount;
            ELSIF p_engine = 'unlogged' THEN
                UPDATE ratelimit.key_state_unlogged
                SET instant = s_instant,
                    amount = (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost,
                    expires_at = greatest(s_instant + p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 1 AND carry = 0 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost <= p_limit
                RETURNING amount INTO s_amount;
            END IF;
            IF FOUND THEN
                RETURN ROW(true, p_limit, p_limit - s_amount, 0, greatest(0, s_instant + p_period - p_now), false, false,
                           true, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
            END IF;
        ELSIF p_algorithm = 2 THEN
            IF p_engine = 'table' THEN
                UPDATE ratelimit.key_state
                SET instant = CASE WHEN amount > 0 AND p_now < instant + p_period
                                   THEN instant ELSE p_now END,
                    amount = (CASE WHEN amount > 0 AND p_now < instant + p_period
                                   THEN amount ELSE 0 END) + p_cost,
                    expires_at = greatest((CASE WHEN amount > 0 AND p_now < instant + p_period
                                                THEN instant ELSE p_now END) + p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 2 AND carry = 0 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN amount > 0 AND p_now < instant + p_period
                            THEN amount ELSE 0 END) + p_cost <= p_limit
                RETURNING instant, amount INTO s_instant, s_amount;
            ELSIF p_engine = 'unlogged' THEN
                UPDATE ratelimit.key_state_unlogged
                SET instant = CASE WHEN amount > 0 AND p_now < instant + p_period
                                   THEN instant ELSE p_now END,
                    amount = (CASE WHEN amount > 0 AND p_now < instant + p_period
                                   THEN amount ELSE 0 END) + p_cost,
                    expires_at = greatest((CASE WHEN amount > 0 AND p_now < instant + p_period
                                                THEN instant ELSE p_now END) + p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 2 AND carry = 0 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN amount > 0 AND p_now < instant + p_period
                            THEN amount ELSE 0 END) + p_cost <= p_limit
                RETURNING instant, amount INTO s_instant, s_amount;
            END IF;
            IF FOUND THEN
                RETURN ROW(true, p_limit, p_limit - s_amount, 0, greatest(0, s_instant + p_period - p_now), false, false,
                           true, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
            END IF;
        ELSIF p_algorithm = 4 THEN
            s_instant := p_now - p_now % p_period;
            IF p_engine = 'table' THEN
                UPDATE ratelimit.key_state
                SET instant = s_instant,
                    amount = (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost,
                    carry = CASE WHEN instant = s_instant THEN carry WHEN instant = s_instant - p_period THEN amount ELSE 0 END,
                    expires_at = greatest(s_instant + 2 * p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 4 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN instant = s_instant THEN carry WHEN instant = s_instant - p_period THEN amount ELSE 0 END)::numeric
                      * (p_period - (p_now - s_instant))
                      + ((CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost)::numeric * p_period
                      <= p_limit::numeric * p_period
                RETURNING amount, carry INTO s_amount, s_carry;
            ELSIF p_engine = 'unlogged' THEN
                UPDATE ratelimit.key_state_unlogged
                SET instant = s_instant,
                    amount = (CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost,
                    carry = CASE WHEN instant = s_instant THEN carry WHEN instant = s_instant - p_period THEN amount ELSE 0 END,
                    expires_at = greatest(s_instant + 2 * p_period, blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = 4 AND log IS NULL
                  AND blocked_until <= p_now AND instant <= p_now
                  AND (CASE WHEN instant = s_instant THEN carry WHEN instant = s_instant - p_period THEN amount ELSE 0 END)::numeric
                      * (p_period - (p_now - s_instant))
                      + ((CASE WHEN instant = s_instant THEN amount ELSE 0 END) + p_cost)::numeric * p_period
                      <= p_limit::numeric * p_period
                RETURNING amount, carry INTO s_amount, s_carry;
            END IF;
            IF FOUND THEN
                RETURN ROW(true, p_limit,
                           greatest(0, pg_catalog.div(p_limit::numeric * p_period - s_carry::numeric * (p_period - (p_now - s_instant))
                                                      - s_amount::numeric * p_period, p_period)),
                           0, s_instant + 2 * p_period - p_now, false, false,
                           true, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
            END IF;
        ELSE
            IF p_engine = 'table' THEN
                UPDATE ratelimit.key_state
                SET instant = p_now,
                    amount = least(amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period), p_burst)
                             - p_cost,
                    carry = CASE WHEN amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_burst
                                 THEN 0 ELSE pg_catalog.mod(carry + (p_now - instant)::numeric * p_limit, p_period) END,
                    expires_at = greatest(p_now + pg_catalog.div(
                        CASE WHEN amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_burst
                             THEN p_cost::numeric * p_period
                             ELSE (p_burst + p_cost - amount)::numeric * p_period - carry - (p_now - instant)::numeric * p_limit END
                        + p_limit - 1, p_limit), blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = p_algorithm AND log = ARRAY[p_limit, p_period]
                  AND blocked_until <= p_now AND instant <= p_now
                  AND amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_cost
                RETURNING amount, carry INTO s_amount, s_carry;
            ELSIF p_engine = 'unlogged' THEN
                UPDATE ratelimit.key_state_unlogged
                SET instant = p_now,
                    amount = least(amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period), p_burst)
                             - p_cost,
                    carry = CASE WHEN amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_burst
                                 THEN 0 ELSE pg_catalog.mod(carry + (p_now - instant)::numeric * p_limit, p_period) END,
                    expires_at = greatest(p_now + pg_catalog.div(
                        CASE WHEN amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_burst
                             THEN p_cost::numeric * p_period
                             ELSE (p_burst + p_cost - amount)::numeric * p_period - carry - (p_now - instant)::numeric * p_limit END
                        + p_limit - 1, p_limit), blocked_until)
                WHERE policy = p_space AND key = p_key AND algorithm = p_algorithm AND log = ARRAY[p_limit, p_period]
                  AND blocked_until <= p_now AND instant <= p_now
                  AND amount + pg_catalog.div(carry + (p_now - instant)::numeric * p_limit, p_period) >= p_cost
                RETURNING amount, carry INTO s_amount, s_carry;
            END IF;
            IF FOUND THEN
                RETURN ROW(true, p_burst, s_amount, 0,
                           pg_catalog.div((p_burst - s_amount)::numeric * p_period - s_carry + p_limit - 1, p_limit), false, false,
                           true, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
            END IF;
        END IF;
        IF p_engine = 'table' THEN
            INSERT INTO ratelimit.key_state (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, p_algorithm,
                        CASE WHEN p_algorithm IN (1, 4) THEN p_now - p_now % p_period ELSE p_now END,
                        CASE WHEN p_algorithm >= 5 THEN p_burst - p_cost WHEN p_algorithm = 3 THEN 0 ELSE p_cost END, 0,
                        CASE WHEN p_algorithm >= 5 THEN ARRAY[p_limit, p_period] WHEN p_algorithm = 3 THEN ARRAY[p_now, p_cost] END,
                        0, CASE p_algorithm WHEN 1 THEN p_now - p_now % p_period + p_period
                                            WHEN 4 THEN p_now - p_now % p_period + 2 * p_period
                                            WHEN 2 THEN p_now + p_period WHEN 3 THEN p_now + p_period
                                            ELSE p_now + pg_catalog.div(p_cost::numeric * p_period + p_limit - 1, p_limit)::bigint END,
                        p_space)
                ON CONFLICT (policy, key) DO NOTHING;
        ELSIF p_engine = 'unlogged' THEN
            INSERT INTO ratelimit.key_state_unlogged (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, p_algorithm,
                        CASE WHEN p_algorithm IN (1, 4) THEN p_now - p_now % p_period ELSE p_now END,
                        CASE WHEN p_algorithm >= 5 THEN p_burst - p_cost WHEN p_algorithm = 3 THEN 0 ELSE p_cost END, 0,
                        CASE WHEN p_algorithm >= 5 THEN ARRAY[p_limit, p_period] WHEN p_algorithm = 3 THEN ARRAY[p_now, p_cost] END,
                        0, CASE p_algorithm WHEN 1 THEN p_now - p_now % p_period + p_period
                                            WHEN 4 THEN p_now - p_now % p_period + 2 * p_period
                                            WHEN 2 THEN p_now + p_period WHEN 3 THEN p_now + p_period
                                            ELSE p_now + pg_catalog.div(p_cost::numeric * p_period + p_limit - 1, p_limit)::bigint END,
                        p_space)
                ON CONFLICT (policy, key) DO NOTHING;
        END IF;
        IF FOUND THEN
            RETURN ROW(true, CASE WHEN p_algorithm >= 5 THEN p_burst ELSE p_limit END,
                       CASE WHEN p_algorithm >= 5 THEN p_burst ELSE p_limit END - p_cost, 0,
                       CASE p_algorithm WHEN 1 THEN p_now - p_now % p_period + p_period - p_now
                                        WHEN 4 THEN p_now - p_now % p_period + 2 * p_period - p_now
                                        WHEN 2 THEN p_period WHEN 3 THEN p_period
                                        ELSE pg_catalog.div(p_cost::numeric * p_period + p_limit - 1, p_limit)::bigint END,
                       false, false, true, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::ratelimit.state_decision;
        END IF;
        s_instant := NULL;
        s_amount := NULL;
        s_carry := NULL;
    END IF;
    LOOP
        -- The latest committed version, read with a snapshot of its own; after a write that
        -- lost to another transaction's, locked, so that the next write lands. No row: every
        -- target NULL, a key never seen (or reset).
        IF p_engine = 'table' THEN
            IF v_locked THEN
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until
                INTO v_ctid, v_xmin, s_algorithm, s_instant, s_amount, s_carry, s_log, s_blocked
                FROM ratelimit.key_state WHERE policy = p_space AND key = p_key
                FOR NO KEY UPDATE;
            ELSE
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until
                INTO v_ctid, v_xmin, s_algorithm, s_instant, s_amount, s_carry, s_log, s_blocked
                FROM ratelimit.key_state WHERE policy = p_space AND key = p_key;
            END IF;
        ELSIF p_engine = 'unlogged' THEN
            IF pg_catalog.pg_is_in_recovery() THEN
                -- A standby has only the unlogged table's empty init fork: no key there.
                NULL;
            ELSIF v_locked THEN
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until
                INTO v_ctid, v_xmin, s_algorithm, s_instant, s_amount, s_carry, s_log, s_blocked
                FROM ratelimit.key_state_unlogged WHERE policy = p_space AND key = p_key
                FOR NO KEY UPDATE;
            ELSE
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until
                INTO v_ctid, v_xmin, s_algorithm, s_instant, s_amount, s_carry, s_log, s_blocked
                FROM ratelimit.key_state_unlogged WHERE policy = p_space AND key = p_key;
            END IF;
        ELSE
            PERFORM ratelimit.refuse_memory_engine('p_engine');
        END IF;
        IF p_action = 5 THEN
            v_before := ratelimit.decide_state(p_algorithm, p_limit, p_period, p_burst, p_window_start,
                                               p_window_end, p_max_delay, coalesce(s_algorithm, 0::smallint),
                                               coalesce(s_instant, 0), coalesce(s_amount, 0), coalesce(s_carry, 0),
                                               s_log, coalesce(s_blocked, 0), p_now, p_cost, 1::smallint);
            v_before.before := ROW(v_before.allowed, v_before."limit", v_before.remaining, v_before.retry_after,
                                   v_before.reset_after, v_before.blocked, v_before.never)::ratelimit.key_decision;
            IF NOT v_before.allowed THEN
                RETURN v_before;
            END IF;
        END IF;
        r := ratelimit.decide_state(p_algorithm, p_limit, p_period, p_burst, p_window_start, p_window_end,
                                    p_max_delay, coalesce(s_algorithm, 0::smallint), coalesce(s_instant, 0),
                                    coalesce(s_amount, 0), coalesce(s_carry, 0), s_log, coalesce(s_blocked, 0),
                                    p_now, p_cost, CASE WHEN p_action >= 5 THEN 0 ELSE p_action END::smallint);
        EXIT WHEN NOT r.changed;
        IF p_engine = 'table' THEN
            IF v_ctid IS NULL THEN
                INSERT INTO ratelimit.key_state (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, r.algorithm, r.instant, r.amount, r.carry, r.log, r.blocked_until, r.expires_at, p_space)
                ON CONFLICT (policy, key) DO NOTHING;
            ELSE
                UPDATE ratelimit.key_state
                SET algorithm = r.algorithm, instant = r.instant, amount = r.amount, carry = r.carry,
                    log = r.log, blocked_until = r.blocked_until, expires_at = r.expires_at
                WHERE ctid = v_ctid AND xmin = v_xmin;
            END IF;
        ELSIF v_ctid IS NULL THEN
            INSERT INTO ratelimit.key_state_unlogged (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
            VALUES (p_key, r.algorithm, r.instant, r.amount, r.carry, r.log, r.blocked_until, r.expires_at, p_space)
            ON CONFLICT (policy, key) DO NOTHING;
        ELSE
            UPDATE ratelimit.key_state_unlogged
            SET algorithm = r.algorithm, instant = r.instant, amount = r.amount, carry = r.carry,
                log = r.log, blocked_until = r.blocked_until, expires_at = r.expires_at
            WHERE ctid = v_ctid AND xmin = v_xmin;
        END IF;
        EXIT WHEN FOUND;
        v_locked := true;
    END LOOP;
    IF p_action = 5 THEN
        r.before := v_before.before;
    END IF;
    RETURN r;
END
$$;

-- The arguments of a native call (consume, peek, refund, allow, consume_many, peek_many) that
-- its one test of usual arguments did not pass: every check in the C edition's order (p_key,
-- the limit, a refund's cost, consume's p_max_wait, the clock, the memory engine, a read-only
-- transaction for the calls that write), then the limit at p_now. p_function names the call
-- as the C edition's errors do ('ratelimit.consume()'); the _many calls check their keys
-- themselves.
CREATE FUNCTION ratelimit.native_limit(
    p_function text,
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer,
    p_algorithm text,
    p_engine text,
    p_burst integer,
    p_time_zone text,
    p_max_wait interval,
    p_now bigint)
RETURNS ratelimit.limit_values
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l ratelimit.limit_values;
BEGIN
    IF p_function NOT IN ('ratelimit.consume_many()', 'ratelimit.peek_many()')
       AND (p_key IS NULL OR pg_catalog.octet_length(p_key) NOT BETWEEN 1 AND 256) THEN
        PERFORM ratelimit.refuse_key('p_key', p_key);
    END IF;
    l := ratelimit.checked_limit(p_limit, p_period, p_algorithm, p_engine, p_burst, p_time_zone, p_cost, true);
    -- A consume or peek of more than the key could ever allow is a denial; a refund of more
    -- than one call could ever have taken is a mistake.
    IF p_function = 'ratelimit.refund()' AND p_cost > l.burst THEN
        RAISE EXCEPTION 'p_cost exceeds % (%): a refund gives back at most what one call could take',
            CASE WHEN l.algorithm >= 5 THEN 'p_burst' ELSE 'p_limit' END, l.burst
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_function = 'ratelimit.consume()' THEN
        l.max_delay := ratelimit.max_wait_micros(p_max_wait, l.algorithm);
    END IF;
    IF p_now NOT BETWEEN 0 AND 253402300800000000 THEN
        RAISE EXCEPTION 'clock must read between 1970 and the year 10000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_engine = 'memory' THEN
        PERFORM ratelimit.refuse_memory_engine('p_engine');
    END IF;
    IF p_function NOT IN ('ratelimit.peek()', 'ratelimit.peek_many()')
       AND pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute % in a read-only transaction', p_function
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    RETURN ratelimit.limit_at(l, p_now);
END
$$;

-- One key's decision in microseconds (see the top of this file).
CREATE FUNCTION ratelimit.key_decide_micros(
    p_engine text,
    p_space text,
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer,
    p_algorithm text,
    p_burst integer,
    p_time_zone text,
    p_max_wait interval,
    p_action text,
    p_now bigint)
RETURNS ratelimit.key_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l ratelimit.limit_values;
    r ratelimit.state_decision;
BEGIN
    IF p_time_zone IS NULL AND extract(month FROM p_period) = 0 THEN
        r := ratelimit.key_apply(p_engine, p_space, p_key,
                                 CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
                                                  WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4
                                                  WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END::smallint,
                                 p_limit, (extract(epoch FROM p_period) * 1000000)::bigint, coalesce(p_burst, p_limit),
                                 0, 0, coalesce((extract(epoch FROM p_max_wait) * 1000000)::bigint, 0), p_cost,
                                 CASE p_action WHEN 'consume' THEN 0 WHEN 'peek' THEN 1 WHEN 'refund' THEN 2
                                               WHEN 'charge' THEN 3 END::smallint, p_now);
    ELSE
        l := ratelimit.limit_of(p_limit, p_period, p_algorithm, p_burst, p_time_zone, p_max_wait, p_now);
        r := ratelimit.key_apply(p_engine, p_space, p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost,
                                 CASE p_action WHEN 'consume' THEN 0 WHEN 'peek' THEN 1 WHEN 'refund' THEN 2
                                               WHEN 'charge' THEN 3 END::smallint, p_now);
    END IF;
    RETURN ROW(r.allowed, r."limit", r.remaining, r.retry_after, r.reset_after, r.blocked, r.never)::ratelimit.key_decision;
END
$$;

-- One key's decision as the native API answers it (see the top of this file).
CREATE FUNCTION ratelimit.key_decide(
    p_engine text,
    p_space text,
    p_key text,
    p_limit integer,
    p_period interval,
    p_cost integer,
    p_algorithm text,
    p_burst integer,
    p_time_zone text,
    p_max_wait interval,
    p_action text,
    p_now bigint)
RETURNS ratelimit.decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l ratelimit.limit_values;
    r ratelimit.state_decision;
BEGIN
    IF p_time_zone IS NULL AND extract(month FROM p_period) = 0 THEN
        r := ratelimit.key_apply(p_engine, p_space, p_key,
                                 CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
                                                  WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4
                                                  WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END::smallint,
                                 p_limit, (extract(epoch FROM p_period) * 1000000)::bigint, coalesce(p_burst, p_limit),
                                 0, 0, coalesce((extract(epoch FROM p_max_wait) * 1000000)::bigint, 0), p_cost,
                                 CASE p_action WHEN 'consume' THEN 0 WHEN 'peek' THEN 1 WHEN 'refund' THEN 2
                                               WHEN 'charge' THEN 3 END::smallint, p_now);
    ELSE
        l := ratelimit.limit_of(p_limit, p_period, p_algorithm, p_burst, p_time_zone, p_max_wait, p_now);
        r := ratelimit.key_apply(p_engine, p_space, p_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost,
                                 CASE p_action WHEN 'consume' THEN 0 WHEN 'peek' THEN 1 WHEN 'refund' THEN 2
                                               WHEN 'charge' THEN 3 END::smallint, p_now);
    END IF;
    RETURN ROW(r.allowed, r."limit", r.remaining,
               CASE WHEN r.never THEN NULL WHEN r.retry_after <= 0 THEN 0 ELSE (r.retry_after + 999) / 1000 END,
               CASE WHEN r.reset_after <= 0 THEN 0 ELSE (r.reset_after + 999) / 1000 END)::ratelimit.decision;
END
$$;

-- Blocks the key until p_until (an earlier end never shortens an existing block); returns the
-- block's end. The row keeps its state and gets expires_at at least the block's end.
CREATE FUNCTION ratelimit.key_block(p_engine text, p_space text, p_key text, p_until bigint, p_now bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_locked boolean := false;
    v_found boolean;
    v_ctid tid;
    v_xmin xid;
    s ratelimit.key_state;
    v_values integer;
BEGIN
    LOOP
        IF p_engine = 'table' THEN
            IF v_locked THEN
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until, expires_at
                INTO v_ctid, v_xmin, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at
                FROM ratelimit.key_state WHERE policy = p_space AND key = p_key FOR NO KEY UPDATE;
            ELSE
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until, expires_at
                INTO v_ctid, v_xmin, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at
                FROM ratelimit.key_state WHERE policy = p_space AND key = p_key;
            END IF;
        ELSIF p_engine = 'unlogged' THEN
            IF v_locked THEN
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until, expires_at
                INTO v_ctid, v_xmin, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at
                FROM ratelimit.key_state_unlogged WHERE policy = p_space AND key = p_key FOR NO KEY UPDATE;
            ELSE
                SELECT ctid, xmin, algorithm, instant, amount, carry, log, blocked_until, expires_at
                INTO v_ctid, v_xmin, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at
                FROM ratelimit.key_state_unlogged WHERE policy = p_space AND key = p_key;
            END IF;
        ELSE
            PERFORM ratelimit.refuse_memory_engine('p_engine');
        END IF;
        v_found := FOUND;
        IF NOT v_found THEN
            s := ROW(p_key, 0, 0, 0, 0, NULL, 0, 0, p_space)::ratelimit.key_state;
        END IF;
        -- The state as the engine reads and writes it back: a bucket's two measured values
        -- (its measured limit above zero), another algorithm's whole pairs.
        v_values := coalesce(pg_catalog.array_length(s.log, 1), 0);
        s.log := CASE WHEN s.algorithm IN (5, 6) THEN CASE WHEN v_values = 2 AND s.log[1] > 0 THEN s.log END
                      WHEN v_values >= 2 THEN s.log[1:v_values - v_values % 2] END;
        s.blocked_until := greatest(s.blocked_until, p_until);
        s.expires_at := greatest(s.expires_at, s.blocked_until);
        IF p_engine = 'table' THEN
            IF v_found THEN
                UPDATE ratelimit.key_state
                SET algorithm = s.algorithm, instant = s.instant, amount = s.amount, carry = s.carry,
                    log = s.log, blocked_until = s.blocked_until, expires_at = s.expires_at
                WHERE ctid = v_ctid AND xmin = v_xmin;
            ELSE
                INSERT INTO ratelimit.key_state (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at, p_space)
                ON CONFLICT (policy, key) DO NOTHING;
            END IF;
        ELSE
            IF v_found THEN
                UPDATE ratelimit.key_state_unlogged
                SET algorithm = s.algorithm, instant = s.instant, amount = s.amount, carry = s.carry,
                    log = s.log, blocked_until = s.blocked_until, expires_at = s.expires_at
                WHERE ctid = v_ctid AND xmin = v_xmin;
            ELSE
                INSERT INTO ratelimit.key_state_unlogged (key, algorithm, instant, amount, carry, log, blocked_until, expires_at, policy)
                VALUES (p_key, s.algorithm, s.instant, s.amount, s.carry, s.log, s.blocked_until, s.expires_at, p_space)
                ON CONFLICT (policy, key) DO NOTHING;
            END IF;
        END IF;
        EXIT WHEN FOUND;
        v_locked := true;
    END LOOP;
    RETURN s.blocked_until;
END
$$;

-- Forgets the key (its counts and its block); true if it had a row. A concurrent writer is
-- waited for, and its latest version deleted.
CREATE FUNCTION ratelimit.key_reset(p_engine text, p_space text, p_key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF p_engine = 'table' THEN
        DELETE FROM ratelimit.key_state WHERE policy = p_space AND key = p_key;
    ELSIF p_engine = 'unlogged' THEN
        DELETE FROM ratelimit.key_state_unlogged WHERE policy = p_space AND key = p_key;
    ELSE
        PERFORM ratelimit.refuse_memory_engine('p_engine');
    END IF;
    RETURN FOUND;
END
$$;

-- Several limits decided as one, all or nothing: the contract is at the top of this file.
CREATE FUNCTION ratelimit.decide_tiers(
    p_engines text[],
    p_spaces text[],
    p_keys text[],
    p_limits integer[],
    p_periods interval[],
    p_algorithms text[],
    p_bursts integer[],
    p_time_zones text[],
    p_max_waits interval[],
    p_enforced boolean[],
    p_cost integer,
    p_now bigint,
    OUT allowed boolean,
    OUT decisions ratelimit.key_decision[])
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_count constant integer := coalesce(pg_catalog.array_length(p_keys, 1), 0);
    v_order integer[];
    v_before ratelimit.key_decision[];
    v_after ratelimit.key_decision[];
    v_charged boolean[];
    l ratelimit.limit_values;
    r ratelimit.state_decision;
    i integer;
    j integer;
    k integer;
    v_moving integer;
BEGIN
    allowed := true;
    decisions := '{}';
    IF v_count = 0 THEN
        RETURN;
    END IF;
    -- The tiers in the order their rows are taken: table before unlogged, then namespace and
    -- key bytewise, the order given on a tie (sort_tiers).
    v_order := ARRAY[1];
    FOR i IN 2 .. v_count LOOP
        v_order := v_order || i;
        j := i - 1;
        WHILE j >= 1 LOOP
            k := v_order[j];
            EXIT WHEN (p_engines[k] = 'unlogged', p_spaces[k] COLLATE "C", p_keys[k] COLLATE "C")
                      <= (p_engines[i] = 'unlogged', p_spaces[i] COLLATE "C", p_keys[i] COLLATE "C");
            v_order[j + 1] := k;
            j := j - 1;
        END LOOP;
        v_order[j + 1] := i;
    END LOOP;
    v_before := pg_catalog.array_fill(NULL::ratelimit.key_decision, ARRAY[v_count]);
    v_after := v_before;
    v_charged := pg_catalog.array_fill(false, ARRAY[v_count]);
    IF v_count = 1 THEN
        -- One tier: a denial writes nothing, so there is nothing to undo; and a consume that
        -- is denied says what its peek says, so the consume alone decides it.
        l := ratelimit.limit_of(p_limits[1], p_periods[1], p_algorithms[1], p_bursts[1], p_time_zones[1],
                                p_max_waits[1], p_now);
        r := ratelimit.key_apply(p_engines[1], p_spaces[1], p_keys[1], l.algorithm, l."limit", l.period, l.burst,
                                 l.window_start, l.window_end, l.max_delay, p_cost, 0::smallint, p_now);
        allowed := r.allowed OR NOT coalesce(p_enforced[1], true);
        decisions := ARRAY[ROW(r.allowed, r."limit", r.remaining, r.retry_after, r.reset_after, r.blocked,
                               r.never)::ratelimit.key_decision];
        RETURN;
    ELSE
        BEGIN
            FOREACH i IN ARRAY v_order LOOP
                l := ratelimit.limit_of(p_limits[i], p_periods[i], p_algorithms[i], p_bursts[i], p_time_zones[i],
                                        p_max_waits[i], p_now);
                r := ratelimit.key_apply(p_engines[i], p_spaces[i], p_keys[i], l.algorithm, l."limit", l.period,
                                         l.burst, l.window_start, l.window_end, l.max_delay, p_cost, 5::smallint, p_now);
                v_before[i] := r.before;
                IF (r.before).allowed THEN
                    v_after[i] := ROW(r.allowed, r."limit", r.remaining, r.retry_after, r.reset_after, r.blocked, r.never);
                    v_charged[i] := true;
                END IF;
                IF coalesce(p_enforced[i], true) AND NOT (r.before).allowed THEN
                    allowed := false;
                END IF;
            END LOOP;
            IF NOT allowed THEN
                -- Undoes every charge of this call (the block's subtransaction); the decisions
                -- made stay in the variables.
                RAISE EXCEPTION USING ERRCODE = 'RLU01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'RLU01' THEN
            NULL;
        END;
    END IF;
    FOR i IN 1 .. v_count LOOP
        decisions := decisions || CASE WHEN allowed AND v_charged[i] THEN v_after[i] ELSE v_before[i] END;
    END LOOP;
END
$$;

-- consume_many and peek_many (p_action 0 and 1, as key_apply takes them; p_function names the
-- call in errors): every key checked before the limit, all of them before the first is decided,
-- then each key decided on its own, in the order given.
CREATE FUNCTION ratelimit.native_many(p_function text, p_action smallint, p_keys text[], p_limit integer,
                                      p_period interval, p_cost integer, p_algorithm text, p_engine text,
                                      p_burst integer, p_time_zone text)
RETURNS ratelimit.decision[]
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now constant bigint := (extract(epoch FROM ratelimit.clock_now()) * 1000000)::bigint;
    v_algorithm constant smallint := CASE p_algorithm WHEN 'fixed_window' THEN 1 WHEN 'rolling_window' THEN 2
        WHEN 'sliding_window' THEN 3 WHEN 'sliding_window_counter' THEN 4 WHEN 'token_bucket' THEN 5 WHEN 'gcra' THEN 6 END;
    -- p_period in microseconds, when it has no months and no time zone comes with it.
    v_period constant numeric := CASE WHEN p_time_zone IS NULL AND pg_catalog.isfinite(p_period)
                                           AND pg_catalog.date_trunc('month', p_period) = interval '0'
                                      THEN extract(epoch FROM p_period) * 1000000 END;
    v_count integer;
    v_key text;
    i integer := 0;
    l record;  -- ratelimit.limit_values, which is made after this function
    r record;  -- ratelimit.state_decision
    v_decisions ratelimit.decision[] := '{}';
BEGIN
    IF p_keys IS NULL THEN
        RAISE EXCEPTION 'p_keys must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.array_ndims(p_keys) > 1 THEN
        RAISE EXCEPTION 'p_keys must be a one-dimensional array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_count := coalesce(pg_catalog.array_length(p_keys, 1), 0);
    IF v_count < 1 OR v_count > 10000 THEN
        RAISE EXCEPTION 'p_keys must have 1 to 10000 elements (got %)', v_count USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH v_key IN ARRAY p_keys LOOP
        i := i + 1;
        IF v_key IS NULL OR pg_catalog.octet_length(v_key) NOT BETWEEN 1 AND 256 THEN
            PERFORM ratelimit.refuse_key('p_keys[' || i || ']', v_key);
        END IF;
    END LOOP;
    IF v_period BETWEEN 1000 AND 31536000000000 AND extract(day FROM p_period) BETWEEN -106751991 AND 106751991
       AND p_limit > 0 AND p_cost >= 0 AND v_algorithm IS NOT NULL AND p_engine IN ('table', 'unlogged')
       AND (p_burst IS NULL OR (v_algorithm >= 5 AND p_burst > 0
                                AND p_burst::numeric * v_period <= p_limit::numeric * 31536000000000))
       AND v_now BETWEEN 0 AND 253402300800000000
       AND (p_action = 1 OR pg_catalog.current_setting('transaction_read_only') = 'off') THEN
        l := ROW(v_algorithm, p_limit, v_period, coalesce(p_burst, p_limit), 0, 0, 0, 0, NULL)::ratelimit.limit_values;
    ELSE
        l := ratelimit.native_limit(p_function, NULL, p_limit, p_period, p_cost, p_algorithm, p_engine,
                                    p_burst, p_time_zone, NULL, v_now);
    END IF;
    FOREACH v_key IN ARRAY p_keys LOOP
        r := ratelimit.key_apply(p_engine, '', v_key, l.algorithm, l."limit", l.period, l.burst, l.window_start,
                                 l.window_end, l.max_delay, p_cost, p_action, v_now);
        v_decisions := v_decisions || ROW(r.allowed, r."limit", r.remaining,
            CASE WHEN r.never THEN NULL WHEN r.retry_after <= 0 THEN 0 ELSE (r.retry_after + 999) / 1000 END,
            CASE WHEN r.reset_after <= 0 THEN 0 ELSE (r.reset_after + 999) / 1000 END)::ratelimit.decision;
    END LOOP;
    RETURN v_decisions;
END
$$;
