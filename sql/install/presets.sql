-- Presets: the limits of the apps this extension serves, loaded on purpose with
-- ratelimit.load_preset (a fresh install has no policies or tiers). Not dumped: CREATE EXTENSION
-- brings them.

CREATE TABLE ratelimit.preset_catalog (
    preset text COLLATE "C" PRIMARY KEY,
    description text NOT NULL
);

-- Same columns and defaults as ratelimit.policies, so that a preset row and a loaded one compare
-- column for column.
CREATE TABLE ratelimit.preset_policies (
    preset text COLLATE "C" NOT NULL REFERENCES ratelimit.preset_catalog (preset),
    name text COLLATE "C" NOT NULL,
    algorithm text NOT NULL DEFAULT 'fixed_window',
    "limit" integer NOT NULL,
    period interval NOT NULL,
    burst integer,
    engine text NOT NULL DEFAULT 'table',
    count_denied boolean NOT NULL DEFAULT false,
    shadow boolean NOT NULL DEFAULT false,
    hash_key boolean NOT NULL DEFAULT false,
    log_denials boolean NOT NULL DEFAULT false,
    description text,
    PRIMARY KEY (preset, name)
);

CREATE TABLE ratelimit.preset_tiers (
    preset text COLLATE "C" NOT NULL REFERENCES ratelimit.preset_catalog (preset),
    name text COLLATE "C" NOT NULL,
    multiplier numeric NOT NULL DEFAULT 1,
    bypass boolean NOT NULL DEFAULT false,
    description text,
    PRIMARY KEY (preset, name)
);

INSERT INTO ratelimit.preset_catalog (preset, description) VALUES
    ('game-backend', 'The game backend''s per-user RPC limits (rolling windows)'),
    ('social-activity', 'The social app''s per-user activity limits (one-minute windows) and its tiers'),
    ('hourly-endpoints', 'Per-user endpoint limits in hour-aligned windows'),
    ('payment-flow', 'The payment flow''s global, per-IP, per-transaction and per-e-mail limits'),
    ('user-cleanup', 'The orphaned-user cleanup''s global, per-IP and per-e-mail limits (hashed keys)');

-- Table engine everywhere (it needs no preloading): switch one with
-- UPDATE ratelimit.policies SET engine = 'memory' WHERE ...
INSERT INTO ratelimit.preset_policies (preset, name, algorithm, "limit", period, description) VALUES
    -- A window opens at the first call and lasts its period.
    ('game-backend', 'rpc.auth', 'rolling_window', 5, '15 minutes', 'AUTH: login, register'),
    ('game-backend', 'rpc.wallet', 'rolling_window', 30, '1 minute', 'WALLET: reward claims, purchases'),
    ('game-backend', 'rpc.game', 'rolling_window', 100, '1 minute', 'GAME: game start, completion, rewards'),
    ('game-backend', 'rpc.social', 'rolling_window', 50, '1 minute', 'SOCIAL: friend requests, messages'),
    ('game-backend', 'rpc.admin', 'rolling_window', 1000, '1 minute', 'ADMIN: admin operations'),
    ('game-backend', 'rpc.register-with-username-pin', 'rolling_window', 5, '15 minutes', 'Prevent bot account creation'),
    ('game-backend', 'rpc.login-with-username-pin', 'rolling_window', 5, '15 minutes', 'Brute-force protection'),
    ('game-backend', 'rpc.complete-game', 'rolling_window', 20, '1 minute', 'Realistic max 1 game/3 seconds'),
    ('game-backend', 'rpc.credit-gameplay-reward', 'rolling_window', 30, '1 minute', '15 questions x 2 retries'),
    ('game-backend', 'rpc.claim-daily-gift', 'rolling_window', 10, '1 minute', 'Prevent claim spam'),
    ('game-backend', 'rpc.claim_welcome_bonus', 'rolling_window', 5, '60 minutes', 'Prevent abuse attempts'),
    ('game-backend', 'rpc.lootbox-decide', 'rolling_window', 30, '1 minute', 'Max 20 lootboxes/day'),
    ('game-backend', 'rpc.send-friend-request', 'rolling_window', 10, '5 minutes', 'Prevent spam'),
    ('game-backend', 'rpc.send-dm', 'rolling_window', 100, '1 minute', 'Realistic chat usage'),
    -- Epoch-aligned one-minute windows.
    ('social-activity', 'activity.create_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.update_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.delete_post', 'fixed_window', 10, '1 minute', 'posts-guard'),
    ('social-activity', 'activity.add_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.update_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.delete_comment', 'fixed_window', 60, '1 minute', 'comments-guard'),
    ('social-activity', 'activity.create_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.update_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.delete_room', 'fixed_window', 10, '1 minute', 'rooms-guard'),
    ('social-activity', 'activity.create_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.update_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.delete_room_message', 'fixed_window', 60, '1 minute', 'room-message-guard'),
    ('social-activity', 'activity.bulk_import', 'fixed_window', 5, '1 minute', 'Stricter limit for bulk imports'),
    -- Hour-aligned windows; sync-push is charged per task.
    ('hourly-endpoints', 'endpoint.ai-inference', 'fixed_window', 10, '1 hour', 'AI assessments'),
    ('hourly-endpoints', 'endpoint.sync-push', 'fixed_window', 50, '1 hour', 'Task creation (batch-aware: cost = tasks)'),
    ('hourly-endpoints', 'endpoint.create-post', 'fixed_window', 5, '1 hour', 'Post creation'),
    -- Checked global -> ip -> transaction; invoices per e-mail.
    ('payment-flow', 'lotto.transaction', 'sliding_window', 10, '1 minute', 'Per transaction id: replay spam'),
    ('payment-flow', 'lotto.ip', 'sliding_window', 100, '1 minute', 'Per client IP: DoS from one source'),
    ('payment-flow', 'lotto.global', 'sliding_window_counter', 1000, '1 minute', 'All requests: circuit breaker'),
    ('payment-flow', 'lotto.invoices', 'sliding_window', 3, '1 minute', 'New invoices per user e-mail'),
    -- Checked global -> ip -> email; IPs and e-mails hashed.
    ('user-cleanup', 'cleanup.global', 'sliding_window_counter', 1000, '60 seconds', 'All requests'),
    ('user-cleanup', 'cleanup.ip', 'sliding_window', 5, '60 seconds', 'Per hashed IP'),
    ('user-cleanup', 'cleanup.email', 'sliding_window', 3, '3600 seconds', 'Per hashed e-mail');

UPDATE ratelimit.preset_policies SET hash_key = true WHERE name IN ('cleanup.ip', 'cleanup.email');

INSERT INTO ratelimit.preset_tiers (preset, name, multiplier, bypass, description) VALUES
    ('social-activity', 'premium', 2, false, 'Premium users: twice every limit'),
    ('social-activity', 'verified', 1.5, false, 'Verified users: one and a half times every limit'),
    ('social-activity', 'admin', 1, true, 'Administrators: no limit');

-- The presets, with how many policies and tiers each writes.
CREATE FUNCTION ratelimit.presets()
RETURNS TABLE(preset text, policies integer, tiers integer, description text)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.preset,
           (SELECT count(*)::integer FROM ratelimit.preset_policies p WHERE p.preset = c.preset),
           (SELECT count(*)::integer FROM ratelimit.preset_tiers t WHERE t.preset = c.preset),
           c.description
    FROM ratelimit.preset_catalog c
    ORDER BY c.preset
$$;

-- Writes a preset's policies and tiers; returns how many rows it inserted or changed. A row the
-- administrator changed is theirs: it is overwritten only with p_replace, and otherwise nothing
-- is written at all, so a preset is never half loaded.
CREATE FUNCTION ratelimit.load_preset(p_preset text, p_replace boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    differing text;
    written integer;
    total integer := 0;
BEGIN
    IF p_preset IS NULL THEN
        RAISE EXCEPTION 'p_preset must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_replace IS NULL THEN
        RAISE EXCEPTION 'p_replace must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT FROM ratelimit.preset_catalog c WHERE c.preset = p_preset COLLATE "C") THEN
        RAISE EXCEPTION 'p_preset: unknown preset "%"', pg_catalog.left(p_preset, 64)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The presets are the rows of ratelimit.presets().';
    END IF;
    -- No concurrent edit between the comparison and the write.
    LOCK TABLE ratelimit.policies, ratelimit.tiers IN SHARE ROW EXCLUSIVE MODE;

    IF NOT p_replace THEN
        SELECT 'policy "' || p.name || '"' INTO differing
        FROM ratelimit.preset_policies s JOIN ratelimit.policies p ON p.name = s.name
        WHERE s.preset = p_preset COLLATE "C"
          AND (p.algorithm, p."limit", p.period, p.burst, p.engine, p.count_denied, p.shadow,
               p.hash_key, p.log_denials, p.description)
              IS DISTINCT FROM
              (s.algorithm, s."limit", s.period, s.burst, s.engine, s.count_denied, s.shadow,
               s.hash_key, s.log_denials, s.description)
        ORDER BY s.name LIMIT 1;
        IF differing IS NULL THEN
            SELECT 'tier "' || t.name || '"' INTO differing
            FROM ratelimit.preset_tiers s JOIN ratelimit.tiers t ON t.name = s.name
            WHERE s.preset = p_preset COLLATE "C"
              AND (t.multiplier, t.bypass, t.description)
                  IS DISTINCT FROM (s.multiplier, s.bypass, s.description)
            ORDER BY s.name LIMIT 1;
        END IF;
        IF differing IS NOT NULL THEN
            RAISE EXCEPTION 'p_replace: % differs from preset "%"; pass p_replace => true to overwrite it',
                differing, p_preset
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    -- Rows already as the preset has them are not written again.
    INSERT INTO ratelimit.policies AS p (name, algorithm, "limit", period, burst, engine,
                                         count_denied, shadow, hash_key, log_denials, description)
    SELECT s.name, s.algorithm, s."limit", s.period, s.burst, s.engine, s.count_denied, s.shadow,
           s.hash_key, s.log_denials, s.description
    FROM ratelimit.preset_policies s WHERE s.preset = p_preset COLLATE "C"
    ORDER BY s.name
    ON CONFLICT (name) DO UPDATE SET
        algorithm = excluded.algorithm, "limit" = excluded."limit", period = excluded.period,
        burst = excluded.burst, engine = excluded.engine, count_denied = excluded.count_denied,
        shadow = excluded.shadow, hash_key = excluded.hash_key,
        log_denials = excluded.log_denials, description = excluded.description
    WHERE (p.algorithm, p."limit", p.period, p.burst, p.engine, p.count_denied, p.shadow,
           p.hash_key, p.log_denials, p.description)
          IS DISTINCT FROM
          (excluded.algorithm, excluded."limit", excluded.period, excluded.burst, excluded.engine,
           excluded.count_denied, excluded.shadow, excluded.hash_key, excluded.log_denials,
           excluded.description);
    GET DIAGNOSTICS written = ROW_COUNT;
    total := total + written;

    INSERT INTO ratelimit.tiers AS t (name, multiplier, bypass, description)
    SELECT s.name, s.multiplier, s.bypass, s.description
    FROM ratelimit.preset_tiers s WHERE s.preset = p_preset COLLATE "C"
    ORDER BY s.name
    ON CONFLICT (name) DO UPDATE SET
        multiplier = excluded.multiplier, bypass = excluded.bypass,
        description = excluded.description
    WHERE (t.multiplier, t.bypass, t.description)
          IS DISTINCT FROM (excluded.multiplier, excluded.bypass, excluded.description);
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN total + written;
END
$$;
