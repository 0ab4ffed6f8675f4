// The helper with stub clients: the arguments it sends, and what it does when the client
// throws or answers with something other than check_http's object.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  checkRateLimit,
  rateLimitExceeded,
  withRateLimit,
  type RateLimitResult,
  type RateLimitRpcClient,
} from '../rateLimit.js';

function stub(answer: (fn: string, args: Record<string, unknown>) => Promise<{ data: unknown; error: { message: string } | null }>) {
  const calls: Array<{ fn: string; args: Record<string, unknown> }> = [];
  const client: RateLimitRpcClient = {
    rpc(fn, args) {
      calls.push({ fn, args });
      return answer(fn, args);
    },
  };
  return { client, calls };
}

const ALLOWED = {
  allowed: true,
  status: 200,
  headers: { 'X-RateLimit-Limit': '3', 'X-RateLimit-Remaining': '2' },
  body: null,
  decision: { allowed: true, reason: 'within_limits' },
};

describe('arguments', () => {
  test('only the options given are sent, under check_http parameter names', async () => {
    const { client, calls } = stub(async () => ({ data: ALLOWED, error: null }));
    await checkRateLimit(client, { policy: 'p', key: 'k' });
    assert.deepEqual(calls, [{ fn: 'check_http', args: { p_policies: ['p'], p_keys: ['k'] } }]);

    await checkRateLimit(client, {
      policies: ['a', 'b'],
      keys: ['ka', 'kb'],
      cost: 3,
      tier: 'premium',
      ip: '192.0.2.1',
      userId: '00000000-0000-4000-8000-000000000001',
      resetFormat: 'unix',
      bodyShape: 'detailed',
      failOpen: false,
    });
    assert.deepEqual(calls[1]?.args, {
      p_policies: ['a', 'b'],
      p_keys: ['ka', 'kb'],
      p_cost: 3,
      p_tier: 'premium',
      p_ip: '192.0.2.1',
      p_user: '00000000-0000-4000-8000-000000000001',
      p_reset_format: 'unix',
      p_body_shape: 'detailed',
    });
  });

  test('one key applies under every policy', async () => {
    const { client, calls } = stub(async () => ({ data: ALLOWED, error: null }));
    await checkRateLimit(client, { policies: ['a', 'b', 'c'], key: 'k' });
    assert.deepEqual(calls[0]?.args, { p_policies: ['a', 'b', 'c'], p_keys: ['k', 'k', 'k'] });
  });

  test('options without a policy or a key, or with both forms, are errors', async () => {
    const { client, calls } = stub(async () => ({ data: ALLOWED, error: null }));
    const noPolicy = await checkRateLimit(client, { key: 'k' });
    assert.equal(noPolicy.failedOpen, true);
    assert.match(noPolicy.error ?? '', /no policy/);
    const noKey = await checkRateLimit(client, { policy: 'p', failOpen: false });
    assert.equal(noKey.status, 503);
    assert.match(noKey.error ?? '', /no key/);
    const both = await checkRateLimit(client, { policy: 'p', policies: ['p'], key: 'k' });
    assert.match(both.error ?? '', /either policies or policy/);
    assert.equal(calls.length, 0);
  });
});

describe('failures', () => {
  const throwing = stub(async () => {
    throw new Error('fetch failed: connection refused');
  }).client;

  test('a client that throws: fail open', async () => {
    const result = await checkRateLimit(throwing, { policy: 'p', key: 'k' });
    assert.deepEqual(result, {
      allowed: true,
      status: 200,
      headers: {},
      body: null,
      decision: null,
      failedOpen: true,
      error: 'fetch failed: connection refused',
    });
  });

  test('a client that throws, failOpen false: 503', async () => {
    const result = await checkRateLimit(throwing, { policy: 'p', key: 'k', failOpen: false });
    assert.equal(result.allowed, false);
    assert.equal(result.status, 503);
    assert.equal(result.failedOpen, false);
    assert.equal(result.error, 'fetch failed: connection refused');
    const response = rateLimitExceeded(result, { 'Access-Control-Allow-Origin': '*' });
    assert.equal(response.status, 503);
    assert.equal(response.headers.get('Access-Control-Allow-Origin'), '*');
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(body.error, 'Service unavailable');
  });

  test('a client that throws something other than an Error', async () => {
    const { client } = stub(() => Promise.reject('socket hang up'));
    const result = await checkRateLimit(client, { policy: 'p', key: 'k' });
    assert.equal(result.failedOpen, true);
    assert.equal(result.error, 'socket hang up');
  });

  test('an error object from the client', async () => {
    const { client } = stub(async () => ({ data: null, error: { message: 'permission denied for function check_http' } }));
    const open = await checkRateLimit(client, { policy: 'p', key: 'k' });
    assert.equal(open.allowed, true);
    assert.equal(open.failedOpen, true);
    assert.equal(open.error, 'permission denied for function check_http');
    const closed = await checkRateLimit(client, { policy: 'p', key: 'k', failOpen: false });
    assert.equal(closed.allowed, false);
    assert.equal(closed.status, 503);
  });

  test('answers of the wrong shape', async () => {
    const malformed: unknown[] = [
      null,
      'allowed',
      [ALLOWED],
      { ...ALLOWED, allowed: 'true' },
      { ...ALLOWED, status: '200' },
      { ...ALLOWED, headers: { 'X-RateLimit-Limit': 3 } },
      { ...ALLOWED, headers: null },
      { ...ALLOWED, body: 'denied' },
      { ...ALLOWED, decision: [] },
    ];
    for (const data of malformed) {
      const { client } = stub(async () => ({ data, error: null }));
      const open = await checkRateLimit(client, { policy: 'p', key: 'k' });
      assert.equal(open.allowed, true, JSON.stringify(data));
      assert.equal(open.failedOpen, true, JSON.stringify(data));
      assert.match(open.error ?? '', /check_http returned/);
      const closed = await checkRateLimit(client, { policy: 'p', key: 'k', failOpen: false });
      assert.equal(closed.allowed, false, JSON.stringify(data));
      assert.equal(closed.status, 503);
    }
  });
});

describe('responses', () => {
  const denied: RateLimitResult = {
    allowed: false,
    status: 429,
    headers: { 'Retry-After': '60', 'X-RateLimit-Remaining': '0' },
    body: null,
    decision: { allowed: false },
    failedOpen: false,
  };

  test('rateLimitExceeded: 429, the default body when there is none, every header', async () => {
    const response = rateLimitExceeded(denied, { 'Access-Control-Allow-Origin': 'https://app.example' });
    assert.equal(response.status, 429);
    assert.equal(response.headers.get('Access-Control-Allow-Origin'), 'https://app.example');
    assert.equal(response.headers.get('Retry-After'), '60');
    assert.equal(response.headers.get('Content-Type'), 'application/json');
    assert.deepEqual(await response.json(), {
      error: 'Rate limit exceeded',
      message: 'Too many requests. Please try again later.',
    });
    const withBody = rateLimitExceeded({ ...denied, body: { error: 'x', code: 'RATE_LIMIT_EXCEEDED' } });
    assert.deepEqual(await withBody.json(), { error: 'x', code: 'RATE_LIMIT_EXCEEDED' });
  });

  test('withRateLimit keeps the headers the handler set itself', async () => {
    const { client } = stub(async () => ({ data: ALLOWED, error: null }));
    const response = await withRateLimit(client, { policy: 'p', key: 'k' }, {}, async (result) => {
      assert.equal(result.allowed, true);
      return new Response(null, { status: 204, headers: { 'X-RateLimit-Limit': '10' } });
    });
    assert.equal(response.status, 204);
    assert.equal(response.headers.get('X-RateLimit-Limit'), '10');
    assert.equal(response.headers.get('X-RateLimit-Remaining'), '2');
  });

  test('withRateLimit does not catch the handler failing', async () => {
    const { client } = stub(async () => ({ data: ALLOWED, error: null }));
    await assert.rejects(
      withRateLimit(client, { policy: 'p', key: 'k' }, {}, async () => {
        throw new Error('handler broke');
      }),
      /handler broke/,
    );
  });
});
