/**
 * The `json_query` builtin (issue 41): a JMESPath expression (the JMESPath Community library, the default) or an
 * RFC 9535 JSONPath query (json-p3) over JSON the model passes. Both run in a worker thread with a deadline and a
 * heap limit: an expression of a thousand characters can multiply its data (nested projections, pad/replace counts,
 * a backtracking `match()` in a JSONPath filter), and it must not stall or exhaust the agent backend that runs every
 * tenant's turns. The result comes back as JSON text of at most `maxResultBytes`.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { JSON_QUERY_MAX_DATA_CHARS, type JsonQueryArgs } from '../../../core/protocol/builtin-tools.js';
import type { BuiltinOutcome } from './outcome.js';

export interface JsonQueryDeps {
  timeoutMs: number;
  maxResultBytes: number;
}

export interface JsonQueryResult {
  syntax: 'jmespath' | 'jsonpath';
  /** JMESPath: the expression's value; JSONPath: the list of matched values. */
  result: unknown;
}

const HEAP_MB = 96;
const require = createRequire(import.meta.url);
const LIBS = { jmespath: require.resolve('@jmespath-community/jmespath'), jsonpath: require.resolve('json-p3') };

// Plain CommonJS run as the worker's script (`eval: true`), so it loads the same way from tsx and from dist/.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { syntax, query, text, libs, maxBytes } = workerData;
try {
  const data = JSON.parse(text);
  let value;
  if (syntax === 'jmespath') value = require(libs.jmespath).search(data, query);
  else value = require(libs.jsonpath).jsonpath.query(query, data).values();
  const json = JSON.stringify(value === undefined ? null : value);
  if (Buffer.byteLength(json) > maxBytes) parentPort.postMessage({ tooLarge: Buffer.byteLength(json) });
  else parentPort.postMessage({ json });
} catch (err) {
  parentPort.postMessage({ error: String((err && err.message) || err) });
}
`;

type WorkerAnswer = { json: string } | { error: string } | { tooLarge: number };

export async function jsonQuery(deps: JsonQueryDeps, args: JsonQueryArgs, signal?: AbortSignal): Promise<BuiltinOutcome<JsonQueryResult>> {
  const syntax = args.syntax ?? 'jmespath';
  let text: string;
  if (typeof args.data === 'string') {
    text = args.data;
    try {
      JSON.parse(text);
    } catch {
      return { isError: true, result: 'invalid arguments: data is a string that is not JSON text; pass the JSON value itself or its text' };
    }
  } else text = JSON.stringify(args.data);
  if (text.length > JSON_QUERY_MAX_DATA_CHARS)
    return { isError: true, result: `invalid arguments: data is larger than ${JSON_QUERY_MAX_DATA_CHARS} characters of JSON` };

  const answer = await runWorker({ syntax, query: args.query, text, libs: LIBS, maxBytes: deps.maxResultBytes }, deps.timeoutMs, signal);
  if ('timeout' in answer) return { isError: true, result: `the query took longer than ${deps.timeoutMs} ms and was stopped` };
  if ('cancelled' in answer) return { isError: true, result: 'the query was cancelled' };
  if ('crashed' in answer)
    return { isError: true, result: `the query was stopped: it needed more than the ${HEAP_MB} MB it may use (${answer.crashed})` };
  if ('error' in answer)
    return { isError: true, result: `the ${syntax === 'jmespath' ? 'JMESPath' : 'JSONPath'} query failed: ${answer.error}` };
  if ('tooLarge' in answer)
    return {
      isError: true,
      result: `the result is ${answer.tooLarge} bytes of JSON, more than the ${deps.maxResultBytes} a tool may return: select less (a projection, a slice)`,
    };
  return { isError: false, result: { syntax, result: JSON.parse(answer.json) as unknown } };
}

type RunAnswer = WorkerAnswer | { timeout: true } | { cancelled: true } | { crashed: string };

function runWorker(workerData: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<RunAnswer> {
  return new Promise((resolve) => {
    const worker = new Worker(WORKER, {
      eval: true,
      workerData,
      resourceLimits: { maxOldGenerationSizeMb: HEAP_MB, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
      stdout: true,
      stderr: true,
    });
    let settled = false;
    const done = (a: RunAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      resolve(a);
    };
    const timer = setTimeout(() => done({ timeout: true }), timeoutMs);
    const onAbort = () => done({ cancelled: true });
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (m: WorkerAnswer) => done(m));
    worker.once('error', (err) => done({ crashed: (err as { code?: string }).code ?? err.message }));
    worker.once('exit', (code) => done({ crashed: `exit ${code}` }));
  });
}
