// Rate limiting for an edge function through ratelimit.check_http: one round trip decides the
// call under one or more named policies (ratelimit.policies) and returns the status, the
// response headers and the 429 body.
//
// No dependencies: it uses only the Response and Headers globals of the Web platform (Deno,
// Node 18+). Copy this file into supabase/functions/_shared/ and pass it
// supabase.schema('ratelimit') as the client.

/** What the helper needs from a client: supabase.schema('ratelimit') has this shape. */
export interface RateLimitRpcClient {
  rpc(
    fn: string,
    args: Record<string, unknown>,
  ): PromiseLike<{ data: unknown; error: { message: string } | null }>;
}

export interface RateLimitOptions {
  /** The policies to decide together (all or nothing), by name. Or `policy` for one. */
  policies?: string[];
  policy?: string;
  /** keys[i] is the subject (user id, IP, e-mail...) under policies[i]. Or one `key` for all. */
  keys?: string[];
  key?: string;
  /** Units the call takes (default 1). */
  cost?: number;
  /** A row of ratelimit.tiers: its multiplier, or its bypass. */
  tier?: string;
  /** Matched against ratelimit.access_list. */
  ip?: string;
  userId?: string;
  /** X-RateLimit-Reset as an ISO 8601 instant (default) or Unix seconds. */
  resetFormat?: 'iso8601' | 'unix';
  /** The 429 body: {error, message} (default) or with code, limit, current and retryAfter. */
  bodyShape?: 'error_message' | 'detailed';
  /**
   * When the limiter fails (an error from the database, a thrown exception, an answer of the
   * wrong shape): true (default) lets the call through, false refuses it with a 503.
   */
  failOpen?: boolean;
}

export interface RateLimitResult {
  allowed: boolean;
  /** 200, 429 when denied, 503 when the limiter failed and failOpen is false. */
  status: number;
  /** Headers to add to the response ({} when the limiter failed or checked no limit). */
  headers: Record<string, string>;
  /** The JSON body of a refusal; null when allowed. */
  body: Record<string, unknown> | null;
  /** The ratelimit.policy_decision as an object; null when the limiter failed. */
  decision: Record<string, unknown> | null;
  /** True when the call was let through because the limiter failed. */
  failedOpen: boolean;
  /** Why the limiter failed. */
  error?: string;
}

export const DEFAULT_BODY = {
  error: 'Rate limit exceeded',
  message: 'Too many requests. Please try again later.',
} as const;

const UNAVAILABLE_BODY = {
  error: 'Service unavailable',
  message: 'Rate limiting is unavailable. Please try again later.',
} as const;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function failure(message: string, failOpen: boolean): RateLimitResult {
  if (failOpen) {
    return {
      allowed: true,
      status: 200,
      headers: {},
      body: null,
      decision: null,
      failedOpen: true,
      error: message,
    };
  }
  return {
    allowed: false,
    status: 503,
    headers: {},
    body: { ...UNAVAILABLE_BODY },
    decision: null,
    failedOpen: false,
    error: message,
  };
}

/** The check_http arguments for these options; undefined ones are left out (SQL defaults). */
export function checkHttpArgs(options: RateLimitOptions): Record<string, unknown> {
  let policies: string[];
  if (options.policies !== undefined && options.policy !== undefined) {
    throw new Error('give either policies or policy, not both');
  } else if (options.policies !== undefined) {
    policies = options.policies;
  } else if (options.policy !== undefined) {
    policies = [options.policy];
  } else {
    throw new Error('no policy given (policies or policy)');
  }
  let keys: string[];
  if (options.keys !== undefined && options.key !== undefined) {
    throw new Error('give either keys or key, not both');
  } else if (options.keys !== undefined) {
    keys = options.keys;
  } else if (options.key !== undefined) {
    // One subject under every policy.
    keys = policies.map(() => options.key as string);
  } else {
    throw new Error('no key given (keys or key)');
  }
  const args: Record<string, unknown> = { p_policies: policies, p_keys: keys };
  const optional: Array<[string, unknown]> = [
    ['p_cost', options.cost],
    ['p_tier', options.tier],
    ['p_ip', options.ip],
    ['p_user', options.userId],
    ['p_reset_format', options.resetFormat],
    ['p_body_shape', options.bodyShape],
  ];
  for (const [name, value] of optional) {
    if (value !== undefined && value !== null) {
      args[name] = value;
    }
  }
  return args;
}

function parseAnswer(data: unknown): RateLimitResult {
  if (!isObject(data)) {
    throw new Error('check_http returned no object');
  }
  const { allowed, status, headers, body, decision } = data;
  if (typeof allowed !== 'boolean') {
    throw new Error('check_http returned no boolean "allowed"');
  }
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599) {
    throw new Error(`check_http returned no HTTP status (${String(status)})`);
  }
  if (!isObject(headers) || !Object.values(headers).every((v) => typeof v === 'string')) {
    throw new Error('check_http returned headers that are not an object of strings');
  }
  if (body !== null && body !== undefined && !isObject(body)) {
    throw new Error('check_http returned a body that is not an object');
  }
  if (decision !== null && decision !== undefined && !isObject(decision)) {
    throw new Error('check_http returned a decision that is not an object');
  }
  return {
    allowed,
    status,
    headers: { ...(headers as Record<string, string>) },
    body: isObject(body) ? body : null,
    decision: isObject(decision) ? decision : null,
    failedOpen: false,
  };
}

/**
 * Decides one call: client.rpc('check_http', ...). Never throws; when the limiter fails the
 * result lets the call through (failOpen, the default) or refuses it with a 503, and says why
 * in `error`.
 */
export async function checkRateLimit(
  client: RateLimitRpcClient,
  options: RateLimitOptions,
): Promise<RateLimitResult> {
  const failOpen = options.failOpen ?? true;
  try {
    const { data, error } = await client.rpc('check_http', checkHttpArgs(options));
    if (error) {
      return failure(
        typeof error.message === 'string' && error.message !== '' ? error.message : 'check_http failed',
        failOpen,
      );
    }
    return parseAnswer(data);
  } catch (e) {
    return failure(e instanceof Error ? e.message : String(e), failOpen);
  }
}

/**
 * The refusal for a denied result: 429 (503 when the limiter failed closed) with the JSON body
 * check_http chose, the CORS headers and the rate-limit headers.
 */
export function rateLimitExceeded(
  result: RateLimitResult,
  corsHeaders: Record<string, string> = {},
): Response {
  const headers = new Headers(corsHeaders);
  for (const [name, value] of Object.entries(result.headers)) {
    headers.set(name, value);
  }
  headers.set('Content-Type', 'application/json');
  return new Response(JSON.stringify(result.body ?? DEFAULT_BODY), {
    status: result.status === 503 ? 503 : 429,
    headers,
  });
}

/**
 * Checks, then either refuses (without calling the handler) or calls the handler and returns
 * its response with the rate-limit headers added (headers the handler set itself are kept).
 */
export async function withRateLimit(
  client: RateLimitRpcClient,
  options: RateLimitOptions,
  corsHeaders: Record<string, string>,
  handler: (result: RateLimitResult) => Promise<Response>,
): Promise<Response> {
  const result = await checkRateLimit(client, options);
  if (!result.allowed) {
    return rateLimitExceeded(result, corsHeaders);
  }
  const response = await handler(result);
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(result.headers)) {
    if (!headers.has(name)) {
      headers.set(name, value);
    }
  }
  return new Response(response.body, {
    status: response.status,
    statusText: response.statusText,
    headers,
  });
}
