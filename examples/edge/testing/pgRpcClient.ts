// The rpc interface of supabase.schema(schema) over a pg connection, calling functions the way
// PostgREST does: a named-argument call with only the arguments given, each cast to the
// function's argument type, so SQL defaults apply to the others. The result comes back as
// JSON (to_jsonb), as PostgREST returns it. Errors are returned as {message, code}, never
// thrown.

export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

export interface RpcError {
  message: string;
  code: string;
  details?: string;
  hint?: string;
}

export interface RpcResponse {
  data: unknown;
  error: RpcError | null;
}

interface Overload {
  returnsSet: boolean;
  // input arguments in order: name, SQL type, whether it has a default
  args: Array<{ name: string; type: string; hasDefault: boolean }>;
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

const OVERLOADS_SQL = `
SELECT p.proretset AS returns_set,
       p.pronargs AS nargs,
       p.pronargdefaults AS ndefaults,
       coalesce(p.proargnames, '{}') AS names,
       coalesce(p.proargmodes::text[], '{}') AS modes,
       ARRAY(SELECT pg_catalog.format_type(t.oid, NULL)
               FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]))
                    WITH ORDINALITY AS t(oid, position)
              ORDER BY t.position) AS types
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = $1 AND p.proname = $2 AND p.prokind = 'f'`;

export function pgRpcClient(db: Queryable, schema: string) {
  const cache = new Map<string, Overload[]>();

  async function overloads(fn: string): Promise<Overload[]> {
    const cached = cache.get(fn);
    if (cached) {
      return cached;
    }
    const { rows } = await db.query(OVERLOADS_SQL, [schema, fn]);
    const found = rows.map((row): Overload => {
      const names = row.names as string[];
      const modes = row.modes as string[];
      const types = row.types as string[];
      const inputs: Array<{ name: string; type: string }> = [];
      types.forEach((type, i) => {
        const mode = modes[i] ?? 'i';
        if (mode === 'i' || mode === 'b' || mode === 'v') {
          inputs.push({ name: names[i] ?? '', type });
        }
      });
      const firstDefault = Number(row.nargs) - Number(row.ndefaults);
      return {
        returnsSet: row.returns_set === true,
        args: inputs.map((arg, i) => ({ ...arg, hasDefault: i >= firstDefault })),
      };
    });
    cache.set(fn, found);
    return found;
  }

  function notFound(fn: string, given: string[], code: string, why: string): RpcResponse {
    return {
      data: null,
      error: {
        message: `${why} ${schema}.${fn}(${[...given].sort().join(', ')})`,
        code,
      },
    };
  }

  return {
    async rpc(fn: string, args: Record<string, unknown> = {}): Promise<RpcResponse> {
      try {
        const given = Object.keys(args).filter((name) => args[name] !== undefined);
        const candidates = (await overloads(fn)).filter(
          (o) =>
            given.every((name) => o.args.some((arg) => arg.name === name)) &&
            o.args.every((arg) => arg.hasDefault || given.includes(arg.name)),
        );
        if (candidates.length === 0) {
          return notFound(fn, given, 'PGRST202', 'Could not find the function');
        }
        if (candidates.length > 1) {
          return notFound(fn, given, 'PGRST203', 'Could not choose the best candidate function for');
        }
        const overload = candidates[0]!;
        const values: unknown[] = [];
        const named = given.map((name) => {
          const arg = overload.args.find((a) => a.name === name)!;
          values.push(args[name]);
          return `${quoteIdent(name)} := $${values.length}::${arg.type}`;
        });
        const call = `${quoteIdent(schema)}.${quoteIdent(fn)}(${named.join(', ')})`;
        const sql = overload.returnsSet
          ? `SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]'::jsonb) AS data FROM ${call} AS r`
          : `SELECT to_jsonb(${call}) AS data`;
        const { rows } = await db.query(sql, values);
        return { data: rows[0]?.data ?? null, error: null };
      } catch (e) {
        const err = e as { message?: unknown; code?: unknown; detail?: unknown; hint?: unknown };
        const error: RpcError = {
          message: typeof err?.message === 'string' ? err.message : String(e),
          code: typeof err?.code === 'string' ? err.code : '',
        };
        if (typeof err?.detail === 'string') error.details = err.detail;
        if (typeof err?.hint === 'string') error.hint = err.hint;
        return { data: null, error };
      }
    },
  };
}
