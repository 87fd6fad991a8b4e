/**
 * Fail fast (issue 14 §1): which POST /runs failures retry (transport, 5xx, 408/429) and which end the turn at
 * once with the backend's code and message (every other 4xx), and what runAgent commits for a refusal: the
 * failed message, its one `error` event, the conversation freed, and the same outcome on a retried attempt
 * without a second create. MockActivityEnvironment + real PostgreSQL + scripted backend (run-agent-harness.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendHttpError } from '../../core/protocol/backend-client.js';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { backendRefusal } from '../../activities/backend-refusal.js';
import { freshDatabase } from '../support/db.js';
import { attempt, preparedTurn, ScriptedBackend } from './run-agent-harness.js';

const body = (code: string, message: string, status: number) => JSON.stringify({ code, message, status });
const httpError = (status: number, text: string) => new BackendHttpError(status, text, 'create run');

describe('backendRefusal: what a failed POST /runs means', () => {
  it('a 400/422 is a refusal carrying the backend code, status and message', () => {
    const msg = "layer 'knowledge': module knowledge is not available in this deployment yet";
    expect(backendRefusal(httpError(400, body('module_unavailable', msg, 400)))).toEqual({
      code: 'module_unavailable',
      status: 400,
      message: msg,
    });
    expect(backendRefusal(httpError(422, body('session_snapshot_mismatch', 'layers differ', 422)))).toEqual({
      code: 'session_snapshot_mismatch',
      status: 422,
      message: 'layers differ',
    });
    expect(backendRefusal(httpError(413, body('payload_too_large', 'the request body is too large', 413)))?.status).toBe(413);
  });

  it("a deployment's 4xx (token, URL) is refused too, reported as 502 so no client reads it as its own 401", () => {
    expect(backendRefusal(httpError(401, body('unauthorized', 'a valid backend bearer token is required', 401)))).toEqual({
      code: 'unauthorized',
      status: 502,
      message: 'a valid backend bearer token is required',
    });
    // A proxy's HTML page: no body to carry, a stable code instead.
    expect(backendRefusal(httpError(404, '<html>not here</html>'))).toEqual({
      code: 'agent_run_refused',
      status: 502,
      message: 'The agent backend refused the run (HTTP 404).',
    });
  });

  it('5xx, 408, 429 and transport errors are not refusals: the activity retries them', () => {
    for (const status of [500, 502, 503, 504, 408, 429])
      expect(backendRefusal(httpError(status, body('x', 'y', status))), String(status)).toBeNull();
    expect(backendRefusal(new TypeError('fetch failed'))).toBeNull();
    expect(backendRefusal(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5002'), { code: 'ECONNREFUSED' }))).toBeNull();
    expect(backendRefusal(new SyntaxError('Unexpected token < in JSON'))).toBeNull();
  });

  it('a secret in the backend message is not passed on', () => {
    const r = backendRefusal(httpError(400, body('invalid_request', 'bad url https://user:hunter2@example.com/x', 400)));
    expect(r?.message).not.toContain('hunter2');
  });
});

describe('runAgent: a refused run', () => {
  let db: Db;
  const config = loadConfig({}, { DELTA_DEBOUNCE_MS: 20 });
  const logger = createLogger('backend-refusal', 'silent');
  const deps = () => ({ db, config, logger });

  beforeAll(async () => {
    db = createDb(await freshDatabase('backend_refusal'));
  });
  afterAll(async () => {
    await db?.$disconnect();
  });

  class RefusingBackend extends ScriptedBackend {
    constructor(private readonly error: Error) {
      super();
    }
    override createRun = async (): Promise<never> => {
      this.created += 1;
      throw this.error;
    };
  }

  it('fails the turn at once, commits it like a run_failed, and a retried attempt returns the same without creating again', async () => {
    const t = await preparedTurn(db);
    const message = "layer 'runtime': SHELLCTL_AUTH_TOKEN is not set";
    const backend = new RefusingBackend(httpError(400, body('module_unavailable', message, 400)));

    const first = await attempt(deps(), backend, 1).run(t.messageId);
    expect(first).toEqual({ status: 'failed', errorCode: 'module_unavailable' });
    const msg = await db.message.findUniqueOrThrow({ where: { id: t.messageId } });
    expect([msg.status, msg.error_code, msg.error]).toEqual(['failed', 'module_unavailable', message]);
    expect((msg.metadata as { agent_failure?: { reason: string } }).agent_failure?.reason).toBe('run_refused');
    const evs = await db.messageEvent.findMany({ where: { message_id: t.messageId }, orderBy: { seq: 'asc' } });
    expect(evs.map((e) => e.event)).toEqual(['error']);
    expect(evs[0]!.data).toMatchObject({ code: 'module_unavailable', status: 400, message });
    expect((await db.conversation.findUniqueOrThrow({ where: { id: t.conversationId } })).active_message_id).toBeNull();
    const run = await db.agentBackendRun.findUniqueOrThrow({ where: { message_id: t.messageId } });
    expect([run.terminal_type, run.backend_run_id]).toEqual(['run_failed', null]);

    // The activity retried anyway (its completion was lost): the committed terminal answers, nothing is created.
    const again = await attempt(deps(), backend, 2).run(t.messageId);
    expect(again).toEqual({ status: 'failed', errorCode: 'module_unavailable' });
    expect(backend.created).toBe(1);
    expect(await db.messageEvent.count({ where: { message_id: t.messageId } })).toBe(1);
  });

  it('a 503 or a transport error fails the attempt (retried) and commits nothing', async () => {
    for (const err of [httpError(503, body('service_unavailable', 'the run store is unreachable', 503)), new TypeError('fetch failed')]) {
      const t = await preparedTurn(db);
      await expect(attempt(deps(), new RefusingBackend(err), 1).run(t.messageId)).rejects.toBe(err);
      const msg = await db.message.findUniqueOrThrow({ where: { id: t.messageId } });
      // `running` means the backend run exists (written with its id): a create that failed leaves the message pending.
      expect(msg.status).toBe('pending');
      expect(await db.messageEvent.count({ where: { message_id: t.messageId } })).toBe(0);
      expect((await db.agentBackendRun.findUniqueOrThrow({ where: { message_id: t.messageId } })).terminal_type).toBeNull();
    }
  });
});
