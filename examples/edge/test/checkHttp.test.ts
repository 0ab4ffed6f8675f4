// The helper against the real server: ratelimit.check_http called through pgRpcClient, which
// calls it the way PostgREST does. One connection (a session setting, ratelimit.test_clock,
// fixes the time); the policies are created here and removed at the end.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';

import { checkRateLimit, rateLimitExceeded, withRateLimit } from '../rateLimit.js';
import { pgRpcClient } from '../testing/pgRpcClient.js';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const THREE = `edge.three.${run}`; // 3 per minute, fixed window, table engine
const ROOMY = `edge.roomy.${run}`; // 100 per hour
const POLICIES = [THREE, ROOMY];

// Fixed windows are aligned to the epoch: at 10:00:00 a one-minute window ends at 10:01:00.
const NOW = '2026-03-01T10:00:00.000Z';
const NEXT_MINUTE = '2026-03-01T10:01:00.000Z';
const NEXT_HOUR = '2026-03-01T11:00:00.000Z';

const db = new pg.Client();
const client = pgRpcClient(db, 'ratelimit');

let keyCount = 0;
function freshKey(): string {
  keyCount += 1;
  return `user-${run}-${keyCount}`;
}

async function setClock(instant: string): Promise<void> {
  await db.query(`SELECT set_config('ratelimit.test_clock', $1, false)`, [instant]);
}

// What the policy's counter holds for a key, without taking anything: a policy's counters are
// reachable only through the policy, and a call of cost 0 charges nothing.
async function remaining(policy: string, key: string): Promise<number> {
  const { rows } = await db.query(`SELECT remaining FROM ratelimit.check($1, $2, 0)`, [policy, key]);
  return Number(rows[0]!.remaining);
}

before(async () => {
  await db.connect();
  await db.query(
    `INSERT INTO ratelimit.policies (name, algorithm, "limit", period, engine, description)
     VALUES ($1, 'fixed_window', 3, '1 minute', 'table', 'edge helper tests'),
            ($2, 'fixed_window', 100, '1 hour', 'table', 'edge helper tests')`,
    [THREE, ROOMY],
  );
  await setClock(NOW);
});

after(async () => {
  try {
    await db.query(`DELETE FROM ratelimit.policies WHERE name = ANY ($1)`, [POLICIES]);
    await db.query('RESET ratelimit.test_clock');
  } finally {
    await db.end();
  }
});

describe('checkRateLimit', () => {
  test('allows up to the limit, then denies with 429', async () => {
    const key = freshKey();
    for (const left of [2, 1, 0]) {
      const result = await checkRateLimit(client, { policy: THREE, key });
      assert.equal(result.allowed, true);
      assert.equal(result.status, 200);
      assert.equal(result.failedOpen, false);
      assert.equal(result.error, undefined);
      assert.equal(result.body, null);
      assert.equal(result.headers['X-RateLimit-Limit'], '3');
      assert.equal(result.headers['X-RateLimit-Remaining'], String(left));
      assert.equal(result.headers['Retry-After'], undefined);
      assert.equal(result.decision?.reason, 'within_limits');
      assert.equal(result.decision?.remaining, left);
    }
    const denied = await checkRateLimit(client, { policy: THREE, key });
    assert.equal(denied.allowed, false);
    assert.equal(denied.status, 429);
    assert.equal(denied.failedOpen, false);
    assert.equal(denied.decision?.reason, 'limited');
    assert.equal(denied.decision?.policy, THREE);
    assert.deepEqual(denied.body, {
      error: 'Rate limit exceeded',
      message: 'Too many requests. Please try again later.',
    });
    assert.equal(denied.headers['X-RateLimit-Remaining'], '0');
    assert.equal(denied.headers['Retry-After'], '60');

    // Another key has its own allowance.
    const other = await checkRateLimit(client, { policy: THREE, key: freshKey() });
    assert.equal(other.allowed, true);
    assert.equal(other.headers['X-RateLimit-Remaining'], '2');
  });

  test('the next window allows again', async () => {
    const key = freshKey();
    for (let i = 0; i < 3; i++) {
      assert.equal((await checkRateLimit(client, { policy: THREE, key })).allowed, true);
    }
    assert.equal((await checkRateLimit(client, { policy: THREE, key })).allowed, false);
    await setClock(NEXT_MINUTE);
    try {
      const result = await checkRateLimit(client, { policy: THREE, key });
      assert.equal(result.allowed, true);
      assert.equal(result.headers['X-RateLimit-Remaining'], '2');
    } finally {
      await setClock(NOW);
    }
  });

  // The pk parameter is a keyed hash of the subject (test/node/conformance.test.mjs checks it).
  const withoutPk = (headers: Record<string, string>) =>
    Object.fromEntries(
      Object.entries(headers).map(([name, value]) => [name, value.replace(/;pk=:[^:]*:/g, '')]),
    );

  test('headers: IETF fields and X-RateLimit-Reset, ISO 8601 by default', async () => {
    const key = freshKey();
    const allowed = await checkRateLimit(client, { policies: [THREE], keys: [key] });
    assert.deepEqual(withoutPk(allowed.headers), {
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '2',
      'X-RateLimit-Reset': NEXT_MINUTE,
      RateLimit: `"${THREE}";r=2;t=60`,
      'RateLimit-Policy': `"${THREE}";q=3;w=60`,
    });
    await checkRateLimit(client, { policy: THREE, key });
    await checkRateLimit(client, { policy: THREE, key });
    const denied = await checkRateLimit(client, { policy: THREE, key });
    assert.equal(denied.allowed, false);
    assert.deepEqual(withoutPk(denied.headers), {
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': NEXT_MINUTE,
      'Retry-After': '60',
      RateLimit: `"${THREE}";r=0;t=60`,
      'RateLimit-Policy': `"${THREE}";q=3;w=60`,
    });
    // The reset instant is the retry instant: now plus Retry-After.
    assert.equal(
      Date.parse(denied.headers['X-RateLimit-Reset']!),
      Date.parse(NOW) + Number(denied.headers['Retry-After']) * 1000,
    );
  });

  test('headers: X-RateLimit-Reset as Unix seconds', async () => {
    const key = freshKey();
    const unix = String(Date.parse(NEXT_MINUTE) / 1000);
    const allowed = await checkRateLimit(client, { policy: THREE, key, resetFormat: 'unix' });
    assert.equal(allowed.headers['X-RateLimit-Reset'], unix);
    const iso = await checkRateLimit(client, { policy: THREE, key, resetFormat: 'iso8601' });
    assert.equal(iso.headers['X-RateLimit-Reset'], NEXT_MINUTE);
    await checkRateLimit(client, { policy: THREE, key });
    const denied = await checkRateLimit(client, { policy: THREE, key, resetFormat: 'unix' });
    assert.equal(denied.allowed, false);
    assert.equal(denied.headers['X-RateLimit-Reset'], unix);
    assert.equal(denied.headers['Retry-After'], '60');
  });

  test('body shapes: error_message and detailed', async () => {
    const key = freshKey();
    for (let i = 0; i < 3; i++) {
      const allowed = await checkRateLimit(client, { policy: THREE, key, bodyShape: 'detailed' });
      assert.equal(allowed.body, null);
    }
    const simple = await checkRateLimit(client, { policy: THREE, key, bodyShape: 'error_message' });
    assert.deepEqual(simple.body, {
      error: 'Rate limit exceeded',
      message: 'Too many requests. Please try again later.',
    });
    const detailed = await checkRateLimit(client, { policy: THREE, key, bodyShape: 'detailed' });
    assert.deepEqual(detailed.body, {
      error: 'Rate limit exceeded',
      code: 'RATE_LIMIT_EXCEEDED',
      message: 'Too many requests. Limit: 3 per minute. Current: 4. Try again in 60 seconds.',
      limit: 3,
      current: 4,
      retryAfter: 60,
    });
  });

  test('cost takes several units', async () => {
    const key = freshKey();
    const first = await checkRateLimit(client, { policy: THREE, key, cost: 2 });
    assert.equal(first.allowed, true);
    assert.equal(first.headers['X-RateLimit-Remaining'], '1');
    const second = await checkRateLimit(client, { policy: THREE, key, cost: 2 });
    assert.equal(second.allowed, false);
    assert.equal(second.decision?.cost, 2);
    // A denied call takes nothing: one unit is still there.
    assert.equal(await remaining(THREE, key), 1);
    assert.equal((await checkRateLimit(client, { policy: THREE, key })).allowed, true);
  });

  test('several policies are all or nothing', async () => {
    const key = freshKey();
    // Allowed by both: both are charged, and the headers show the tighter one.
    const both = await checkRateLimit(client, { policies: [ROOMY, THREE], keys: [key, key] });
    assert.equal(both.allowed, true);
    assert.equal(both.decision?.policy, THREE);
    assert.equal(both.headers['X-RateLimit-Limit'], '3');
    assert.equal(both.headers['X-RateLimit-Remaining'], '2');
    assert.equal(await remaining(ROOMY, key), 99);
    assert.equal(await remaining(THREE, key), 2);

    // Use up THREE alone.
    await checkRateLimit(client, { policy: THREE, key });
    await checkRateLimit(client, { policy: THREE, key });
    assert.equal(await remaining(THREE, key), 0);

    // The second policy denies: the first, which would allow, is not charged.
    const denied = await checkRateLimit(client, { policies: [ROOMY, THREE], key });
    assert.equal(denied.allowed, false);
    assert.equal(denied.status, 429);
    assert.equal(denied.decision?.policy, THREE);
    assert.equal(denied.headers['X-RateLimit-Limit'], '3');
    assert.equal(denied.headers['Retry-After'], '60');
    assert.equal(await remaining(ROOMY, key), 99);

    // The keys may differ per policy.
    const ipKey = `203.0.113.7-${run}`;
    const perSubject = await checkRateLimit(client, { policies: [ROOMY, THREE], keys: [ipKey, key] });
    assert.equal(perSubject.allowed, false);
    assert.equal(await remaining(ROOMY, ipKey), 100);
    const roomyOnly = await checkRateLimit(client, { policy: ROOMY, key: ipKey });
    assert.equal(roomyOnly.allowed, true);
    assert.equal(roomyOnly.headers['X-RateLimit-Reset'], NEXT_HOUR);
  });

  test('tiers: a multiplier raises the limit, a bypass checks nothing', async () => {
    const premium = await checkRateLimit(client, { policy: THREE, key: freshKey(), tier: 'premium' });
    assert.equal(premium.allowed, true);
    assert.equal(premium.headers['X-RateLimit-Limit'], '6');
    assert.equal(premium.headers['X-RateLimit-Remaining'], '5');

    const key = freshKey();
    for (let i = 0; i < 5; i++) {
      const admin = await checkRateLimit(client, { policy: THREE, key, tier: 'admin' });
      assert.equal(admin.allowed, true);
      assert.equal(admin.decision?.reason, 'bypass');
      assert.deepEqual(admin.headers, {});
    }
    assert.equal(await remaining(THREE, key), 3);
  });

  test('ip and userId are matched against the deny list', async () => {
    const user = '5b3c2f1e-8d4a-4b6c-9e2f-0a1b2c3d4e5f';
    await db.query(
      `INSERT INTO ratelimit.access_list (action, policy, ip, reason)
       VALUES ('deny', $1, '198.51.100.0/24', 'edge helper tests')`,
      [THREE],
    );
    await db.query(
      `INSERT INTO ratelimit.access_list (action, policy, user_id, expires_at, reason)
       VALUES ('deny', $1, $2, $3, 'edge helper tests')`,
      [THREE, user, '2026-03-01T10:05:00Z'],
    );
    const byIp = await checkRateLimit(client, { policy: THREE, key: freshKey(), ip: '198.51.100.23' });
    assert.equal(byIp.allowed, false);
    assert.equal(byIp.status, 429);
    assert.equal(byIp.decision?.reason, 'deny_list');
    // Denied for good: no time to retry at.
    assert.equal(byIp.headers['Retry-After'], undefined);
    assert.equal(byIp.headers['X-RateLimit-Reset'], undefined);

    const otherIp = await checkRateLimit(client, { policy: THREE, key: freshKey(), ip: '198.51.101.23' });
    assert.equal(otherIp.allowed, true);

    const byUser = await checkRateLimit(client, { policy: THREE, key: freshKey(), userId: user });
    assert.equal(byUser.allowed, false);
    assert.equal(byUser.decision?.reason, 'deny_list');
    assert.equal(byUser.headers['Retry-After'], '300');
  });
});

describe('failures', () => {
  test('an unknown policy is an error: fail open by default', async () => {
    const result = await checkRateLimit(client, { policy: `edge.missing.${run}`, key: freshKey() });
    assert.equal(result.allowed, true);
    assert.equal(result.status, 200);
    assert.equal(result.failedOpen, true);
    assert.deepEqual(result.headers, {});
    assert.equal(result.body, null);
    assert.equal(result.decision, null);
    assert.match(result.error ?? '', /unknown policy "edge\.missing\./);
  });

  test('an unknown policy with failOpen false: 503', async () => {
    const result = await checkRateLimit(client, {
      policy: `edge.missing.${run}`,
      key: freshKey(),
      failOpen: false,
    });
    assert.equal(result.allowed, false);
    assert.equal(result.status, 503);
    assert.equal(result.failedOpen, false);
    assert.match(result.error ?? '', /unknown policy/);
    const response = rateLimitExceeded(result);
    assert.equal(response.status, 503);
    assert.equal(response.headers.get('Content-Type'), 'application/json');
    assert.equal(response.headers.get('Retry-After'), null);
  });

  test('an error in a later policy charges nothing', async () => {
    const key = freshKey();
    const result = await checkRateLimit(client, {
      policies: [THREE, `edge.missing.${run}`],
      key,
    });
    assert.equal(result.failedOpen, true);
    assert.equal(await remaining(THREE, key), 3);
  });

  test('keys and policies of different lengths: the server refuses, the helper fails open', async () => {
    const result = await checkRateLimit(client, { policies: [THREE, ROOMY], keys: [freshKey()] });
    assert.equal(result.failedOpen, true);
    assert.match(result.error ?? '', /p_keys must have as many elements as p_policies/);
  });

  test('a bad reset format is refused before anything is charged', async () => {
    const key = freshKey();
    const result = await checkRateLimit(client, {
      policy: THREE,
      key,
      resetFormat: 'rfc1123' as 'unix',
      failOpen: false,
    });
    assert.equal(result.status, 503);
    assert.match(result.error ?? '', /p_reset_format must be one of iso8601, unix/);
    assert.equal(await remaining(THREE, key), 3);
  });
});

describe('withRateLimit', () => {
  const cors = { 'Access-Control-Allow-Origin': '*' };

  test('passes through with the rate-limit headers added', async () => {
    const key = freshKey();
    let calls = 0;
    const response = await withRateLimit(client, { policy: THREE, key }, cors, async () => {
      calls += 1;
      return new Response(JSON.stringify({ ok: true }), {
        status: 201,
        headers: { 'Content-Type': 'application/json', 'X-Handler': 'yes' },
      });
    });
    assert.equal(calls, 1);
    assert.equal(response.status, 201);
    assert.deepEqual(await response.json(), { ok: true });
    assert.equal(response.headers.get('X-Handler'), 'yes');
    assert.equal(response.headers.get('Content-Type'), 'application/json');
    assert.equal(response.headers.get('X-RateLimit-Limit'), '3');
    assert.equal(response.headers.get('X-RateLimit-Remaining'), '2');
    assert.equal(response.headers.get('X-RateLimit-Reset'), NEXT_MINUTE);
    assert.equal(
      response.headers.get('RateLimit-Policy')?.replace(/;pk=:[^:]*:/g, ''),
      `"${THREE}";q=3;w=60`,
    );
    assert.equal(response.headers.get('Retry-After'), null);
  });

  test('denied: 429 without calling the handler', async () => {
    const key = freshKey();
    let calls = 0;
    const handler = async () => {
      calls += 1;
      return new Response('done');
    };
    for (let i = 0; i < 3; i++) {
      const response = await withRateLimit(client, { policy: THREE, key }, cors, handler);
      assert.equal(response.status, 200);
      assert.equal(await response.text(), 'done');
    }
    assert.equal(calls, 3);
    const denied = await withRateLimit(
      client,
      { policy: THREE, key, bodyShape: 'detailed', resetFormat: 'unix' },
      cors,
      handler,
    );
    assert.equal(calls, 3);
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get('Access-Control-Allow-Origin'), '*');
    assert.equal(denied.headers.get('Content-Type'), 'application/json');
    assert.equal(denied.headers.get('Retry-After'), '60');
    assert.equal(denied.headers.get('X-RateLimit-Remaining'), '0');
    assert.equal(denied.headers.get('X-RateLimit-Reset'), String(Date.parse(NEXT_MINUTE) / 1000));
    const body = (await denied.json()) as Record<string, unknown>;
    assert.equal(body.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(body.retryAfter, 60);
  });

  test('the limiter failing: the handler runs (fail open) or a 503 (fail closed)', async () => {
    let calls = 0;
    const handler = async () => {
      calls += 1;
      return new Response('done', { status: 200 });
    };
    const open = await withRateLimit(client, { policy: `edge.missing.${run}`, key: 'k' }, cors, handler);
    assert.equal(calls, 1);
    assert.equal(open.status, 200);
    assert.equal(open.headers.get('X-RateLimit-Limit'), null);

    const closed = await withRateLimit(
      client,
      { policy: `edge.missing.${run}`, key: 'k', failOpen: false },
      cors,
      handler,
    );
    assert.equal(calls, 1);
    assert.equal(closed.status, 503);
    assert.equal(closed.headers.get('Access-Control-Allow-Origin'), '*');
  });
});

describe('pgRpcClient calls functions as PostgREST does', () => {
  test('named arguments, the others at their defaults', async () => {
    const { data, error } = await client.rpc('check_http', {
      p_keys: [freshKey()],
      p_policies: [THREE],
      p_body_shape: undefined,
    });
    assert.equal(error, null);
    const answer = data as { allowed: boolean; headers: Record<string, string> };
    assert.equal(answer.allowed, true);
    assert.equal(answer.headers['X-RateLimit-Reset'], NEXT_MINUTE);
  });

  test('a PostgreSQL error is returned with its SQLSTATE, not thrown', async () => {
    const { data, error } = await client.rpc('check_http', {
      p_policies: [`edge.missing.${run}`],
      p_keys: ['k'],
    });
    assert.equal(data, null);
    assert.equal(error?.code, '22023');
    assert.match(error?.message ?? '', /unknown policy/);

    const badIp = await client.rpc('check_http', { p_policies: [THREE], p_keys: ['k'], p_ip: 'not-an-ip' });
    assert.equal(badIp.error?.code, '22P02');
  });

  test('an unknown function or argument is an error too', async () => {
    const noFunction = await client.rpc('no_such_function', {});
    assert.equal(noFunction.error?.code, 'PGRST202');
    const noArgument = await client.rpc('check_http', { p_policies: [THREE], p_keys: ['k'], p_nope: 1 });
    assert.equal(noArgument.error?.code, 'PGRST202');
    const missingRequired = await client.rpc('check_http', { p_policies: [THREE] });
    assert.equal(missingRequired.error?.code, 'PGRST202');
  });
});
