/**
 * One POST of the backend to the api's inner API (docs/PROTOCOL.md §3–§5) with the inner API key and the run's id:
 * transport errors and 5xx answers are retried (`attempts`, 200 ms × attempt between them; the routes called this way
 * are read-only or idempotent), every other answer goes to `settle`, which returns the result or throws. What it throws
 * is retried too unless `final(err)` says it is a refusal retrying cannot change (a 4xx); a cancelled `signal` ends
 * the call with its reason. When every attempt failed, `exhausted(last error)` is thrown.
 */
export interface InnerApiTarget {
  apiUrl: string;
  innerApiKey: string;
  fetch?: typeof fetch;
}

export interface InnerApiAnswer {
  status: number;
  ok: boolean;
  /** The JSON body, or null when there was none (or it was not JSON). */
  body: unknown;
}

export async function postInnerApi<T>(
  target: InnerApiTarget,
  route: string,
  body: unknown,
  opts: {
    runId: string;
    signal?: AbortSignal;
    timeoutMs: number;
    attempts?: number;
    settle: (answer: InnerApiAnswer) => T;
    final: (err: unknown) => boolean;
    exhausted: (last: unknown) => Error;
  },
): Promise<T> {
  const doFetch = target.fetch ?? fetch;
  const url = `${target.apiUrl.replace(/\/+$/, '')}${route}`;
  const { signal, timeoutMs } = opts;
  let last: unknown;
  for (let attempt = 1; attempt <= (opts.attempts ?? 3); attempt++) {
    try {
      const res = await doFetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-inner-api-key': target.innerApiKey, 'x-agent-run-id': opts.runId },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
      });
      const json: unknown = await res.json().catch(() => null);
      if (res.status >= 500) throw new Error(`the api answered HTTP ${res.status}`);
      return opts.settle({ status: res.status, ok: res.ok, body: json });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (opts.final(err)) throw err;
      last = err;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
  throw opts.exhausted(last);
}
