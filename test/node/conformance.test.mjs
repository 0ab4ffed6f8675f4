// check_http's IETF fields against a Structured Fields parser (RFC 8941): RateLimit and
// RateLimit-Policy as lists with one item per policy (r, t, q, w, qu, pk and their types),
// Retry-After equal to the reported policy's t on a denial, and the problem+json body.
// One connection (ratelimit.test_clock, a session setting, fixes the time); the policies are
// made here and removed at the end.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { parseItem, parseList, Token } from 'structured-headers';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const MINUTE = `sf.minute.${run}`; // 3 per minute
const HOUR = `sf.hour.${run}`; // 100 per hour
const BYTES = `sf.bytes.${run}`; // 5000 per hour, counted in content-bytes
const POLICIES = [MINUTE, HOUR, BYTES];

const db = new pg.Client();
let keyCount = 0;
const freshKey = () => `user-${run}-${(keyCount += 1)}`;

async function checkHttp(policies, keys, bodyShape = 'error_message') {
  const { rows } = await db.query(
    'SELECT ratelimit.check_http(p_policies => $1, p_keys => $2, p_body_shape => $3) AS r',
    [policies, keys, bodyShape],
  );
  return rows[0].r;
}

// A field as a list of [name, parameters]; every member must be an item named by an sf-string.
function items(value) {
  assert.equal(typeof value, 'string');
  const list = parseList(value);
  for (const member of list) {
    assert.ok(!Array.isArray(member[0]), 'an item, not an inner list');
    assert.equal(typeof member[0], 'string', 'the policy is an sf-string');
    assert.ok(member[1] instanceof Map);
  }
  return list;
}

const isInteger = (v) => typeof v === 'number' && Number.isInteger(v);
const isBinary = (v) => v instanceof ArrayBuffer || ArrayBuffer.isView(v);
const bytes = (v) => Buffer.from(v instanceof ArrayBuffer ? new Uint8Array(v) : v).toString('hex');

before(async () => {
  await db.connect();
  await db.query(
    `INSERT INTO ratelimit.policies (name, "limit", period, quota_unit, description)
     VALUES ($1, 3, '1 minute', NULL, 'conformance tests'),
            ($2, 100, '1 hour', 'requests', 'conformance tests'),
            ($3, 5000, '1 hour', 'content-bytes', 'conformance tests')`,
    POLICIES,
  );
  await db.query(`SELECT set_config('ratelimit.test_clock', '2026-03-01 10:00:00+00', false)`);
});

after(async () => {
  try {
    await db.query('DELETE FROM ratelimit.policies WHERE name = ANY ($1)', [POLICIES]);
    await db.query('RESET ratelimit.test_clock');
  } finally {
    await db.end();
  }
});

describe('RateLimit and RateLimit-Policy', () => {
  test('every policy of the call is one item, the reported one first', async () => {
    const key = freshKey();
    const result = await checkHttp(POLICIES, [key, key, key]);
    assert.equal(result.allowed, true);
    const fields = items(result.headers.RateLimit);
    const policies = items(result.headers['RateLimit-Policy']);
    assert.deepEqual(fields.map(([name]) => name), [MINUTE, HOUR, BYTES]);
    assert.deepEqual(policies.map(([name]) => name), [MINUTE, HOUR, BYTES]);
    assert.equal(result.decision.policy, MINUTE);

    for (const [, params] of fields) {
      assert.deepEqual([...params.keys()], ['r', 't', 'pk']);
      assert.ok(isInteger(params.get('r')) && params.get('r') >= 0);
      assert.ok(isInteger(params.get('t')) && params.get('t') >= 0);
      assert.ok(isBinary(params.get('pk')));
    }
    assert.deepEqual(fields.map(([, p]) => [p.get('r'), p.get('t')]), [[2, 60], [99, 3600], [4999, 3600]]);

    const expected = [
      [3, 60, undefined],
      [100, 3600, undefined], // 'requests' is the default: no qu
      [5000, 3600, 'content-bytes'],
    ];
    policies.forEach(([, params], i) => {
      const [q, w, qu] = expected[i];
      assert.equal(params.get('q'), q);
      assert.equal(params.get('w'), w);
      assert.ok(isInteger(params.get('q')) && isInteger(params.get('w')));
      assert.equal(params.get('qu'), qu);
      if (qu !== undefined) {
        assert.equal(typeof params.get('qu'), 'string', 'qu is an sf-string');
        assert.ok(!(params.get('qu') instanceof Token));
      }
      assert.ok(isBinary(params.get('pk')));
      // One partition key per policy and subject, in both fields.
      assert.equal(bytes(params.get('pk')), bytes(fields[i][1].get('pk')));
    });
    // The X-RateLimit-* headers stay the reported policy's.
    assert.equal(result.headers['X-RateLimit-Limit'], '3');
    assert.equal(result.headers['X-RateLimit-Remaining'], '2');
  });

  test('pk: the same for a subject and policy, another for another subject, never the subject', async () => {
    const ann = freshKey();
    const bob = freshKey();
    const pk = async (key) => {
      const result = await checkHttp([HOUR], [key]);
      const [[, params]] = items(result.headers.RateLimit);
      const value = params.get('pk');
      assert.ok(isBinary(value));
      assert.ok(value.byteLength >= 8 && value.byteLength <= 16);
      assert.ok(!result.headers.RateLimit.includes(key));
      assert.ok(!result.headers['RateLimit-Policy'].includes(key));
      return bytes(value);
    };
    const first = await pk(ann);
    assert.equal(await pk(ann), first);
    assert.notEqual(await pk(bob), first);
    // Another policy, same subject: another partition.
    const both = await checkHttp([MINUTE, HOUR], [ann, ann]);
    const keys = items(both.headers.RateLimit).map(([, p]) => bytes(p.get('pk')));
    assert.notEqual(keys[0], keys[1]);
    assert.equal(keys[1], first);
  });

  test('a denial: Retry-After is an integer equal to the reported policy\'s t', async () => {
    const key = freshKey();
    for (let i = 0; i < 3; i += 1)
      assert.equal((await checkHttp([MINUTE, HOUR], [key, key])).allowed, true);
    const denied = await checkHttp([MINUTE, HOUR], [key, key]);
    assert.equal(denied.allowed, false);
    assert.equal(denied.status, 429);
    const retryAfter = parseItem(denied.headers['Retry-After']);
    assert.ok(isInteger(retryAfter[0]) && retryAfter[0] >= 1);
    const fields = items(denied.headers.RateLimit);
    assert.equal(fields[0][0], MINUTE);
    assert.equal(fields[0][1].get('r'), 0);
    assert.equal(fields[0][1].get('t'), retryAfter[0]);
    assert.equal(retryAfter[0], 60);
    // The other policy allowed and nothing was charged: as it stood.
    assert.equal(fields[1][0], HOUR);
    assert.equal(fields[1][1].get('r'), 97);
  });

  test('an allowed call has no Retry-After and no Content-Type', async () => {
    const result = await checkHttp([HOUR], [freshKey()], 'problem');
    assert.equal(result.allowed, true);
    assert.equal(result.headers['Retry-After'], undefined);
    assert.equal(result.headers['Content-Type'], undefined);
    assert.equal(result.body, null);
  });
});

describe('problem+json', () => {
  test('the draft\'s quota-exceeded problem, naming the denying policies', async () => {
    const key = freshKey();
    for (let i = 0; i < 3; i += 1) await checkHttp([MINUTE, HOUR], [key, key], 'problem');
    const denied = await checkHttp([MINUTE, HOUR], [key, key], 'problem');
    assert.equal(denied.status, 429);
    assert.equal(denied.headers['Content-Type'], 'application/problem+json');
    const body = denied.body;
    assert.equal(body.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
    assert.equal(typeof body.title, 'string');
    assert.equal(body.status, 429);
    assert.equal(typeof body.detail, 'string');
    assert.ok(body.detail.includes('Try again in 60 seconds'));
    assert.deepEqual(body['violated-policies'], [MINUTE]);
    // Retry-After and t agree with the problem too.
    assert.equal(Number(denied.headers['Retry-After']), parseItem(denied.headers['Retry-After'])[0]);
  });

  test('the other shapes are unchanged', async () => {
    const key = freshKey();
    for (let i = 0; i < 3; i += 1) await checkHttp([MINUTE], [key]);
    const plain = await checkHttp([MINUTE], [key]);
    assert.deepEqual(plain.body, {
      error: 'Rate limit exceeded',
      message: 'Too many requests. Please try again later.',
    });
    assert.equal(plain.headers['Content-Type'], undefined);
    const detailed = await checkHttp([MINUTE], [key], 'detailed');
    assert.equal(detailed.body.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(detailed.body.retryAfter, 60);
  });
});
