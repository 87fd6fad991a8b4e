/**
 * The audit every fault test ends with: the invariants a turn must keep whatever was killed, checked over
 * PostgreSQL (the product's tables and the agent backend's `agent_backend` schema) and Temporal. It looks
 * at the turns created since `since` (so one test's leftovers do not fail the next) and reports each
 * violation with the ids to look up.
 */
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import type { Client } from '@temporalio/client';
import type { ClientFrame } from './client.js';

export interface Violation {
  invariant: string;
  ids: Record<string, string>;
  detail: string;
}

export interface AuditInput {
  databaseUrl: string;
  /** Runs `fn` with a Temporal client (a fresh connection). */
  withTemporal: <T>(fn: (client: Client) => Promise<T>) => Promise<T>;
  taskQueue: string;
  /** Only messages (and workflows) created at or after this instant are audited. */
  since: Date;
  /** What clients received, per stream (message id taken from the frames). */
  streams?: { frames: ClientFrame[] }[];
}

interface MessageRow {
  id: string;
  conversation_id: string;
  status: string;
  answer: string;
  total_tokens: number;
  workflow_id: string;
  event_seq: number;
  backend_run_id: string | null;
}

interface EventRow {
  message_id: string;
  seq: number;
  event: string;
  data: Record<string, unknown>;
}

const TERMINAL = new Set(['message_end', 'error']);
const ENDED = new Set(['succeeded', 'failed', 'stopped', 'paused']);

export async function audit(input: AuditInput): Promise<Violation[]> {
  const out: Violation[] = [];
  const v = (invariant: string, ids: Record<string, string>, detail: string) => out.push({ invariant, ids, detail });
  const db = new pg.Client({ connectionString: input.databaseUrl });
  await db.connect();
  try {
    const messages = (
      await db.query<MessageRow>(
        `select m.id, m.conversation_id, m.status::text as status, m.answer, m.total_tokens, m.workflow_id, m.event_seq, r.backend_run_id
           from messages m left join agent_backend_runs r on r.message_id = m.id
          where m.created_at >= $1 order by m.created_at`,
        [input.since],
      )
    ).rows;
    const ids = messages.map((m) => m.id);
    const events = (
      await db.query<EventRow>(
        `select message_id, seq, event, data from message_events where message_id = any($1::uuid[]) order by message_id, seq`,
        [ids],
      )
    ).rows;
    const byMessage = new Map<string, EventRow[]>();
    for (const e of events) byMessage.set(e.message_id, [...(byMessage.get(e.message_id) ?? []), e]);

    // Workflows still running: allowed only while they wait for a human on purpose.
    const running = await input.withTemporal(async (client) => {
      const list: string[] = [];
      const query = `TaskQueue = '${input.taskQueue}' AND ExecutionStatus = 'Running' AND StartTime >= '${input.since.toISOString()}'`;
      for await (const wf of client.workflow.list({ query })) list.push(wf.workflowId);
      return list;
    });
    const waitingForms = (
      await db.query<{ message_id: string; workflow_id: string }>(
        `select message_id, workflow_id from human_input_forms where status = 'waiting' and message_id = any($1::uuid[])`,
        [ids],
      )
    ).rows;
    const waitingMessage = new Set(
      waitingForms.filter((f) => messages.find((m) => m.id === f.message_id)?.status === 'paused').map((f) => f.message_id),
    );
    const waitingWorkflow = new Set(waitingForms.filter((f) => waitingMessage.has(f.message_id)).map((f) => f.workflow_id));
    for (const wf of running) {
      if (waitingWorkflow.has(wf)) continue;
      const ms = messages.filter((m) => m.workflow_id === wf).map((m) => `${m.id}:${m.status}`);
      v('no workflow left running', { workflow_id: wf }, `Running, not waiting for a human; its messages: ${ms.join(', ') || 'none'}`);
    }
    const inFlightWorkflow = new Set(running);

    for (const m of messages) {
      const evs = byMessage.get(m.id) ?? [];
      const ids = { message_id: m.id, conversation_id: m.conversation_id };
      // One terminal client event per message, and it is the last one.
      const terminals = evs.filter((e) => TERMINAL.has(e.event));
      if (ENDED.has(m.status)) {
        if (terminals.length !== 1)
          v(
            'one terminal event per message',
            ids,
            `status ${m.status} with ${terminals.length} terminal events (${terminals.map((e) => `${e.seq}:${e.event}`).join(', ')})`,
          );
        else if (terminals[0] !== evs.at(-1))
          v(
            'one terminal event per message',
            ids,
            `terminal ${terminals[0]!.event} at seq ${terminals[0]!.seq} is followed by seq ${evs.at(-1)!.seq}`,
          );
      } else {
        if (terminals.length > 0)
          v('one terminal event per message', ids, `status ${m.status} but the log ended with ${terminals.map((e) => e.event).join(', ')}`);
        if (!inFlightWorkflow.has(m.workflow_id))
          v('no turn left unfinished', ids, `status ${m.status} and workflow ${m.workflow_id} is not running`);
      }
      // Dense unique event ids 1..n, matching the message's counter.
      const seqs = evs.map((e) => e.seq);
      if (
        !isDeepStrictEqual(
          seqs,
          seqs.map((_, i) => i + 1),
        )
      )
        v('dense unique event ids', ids, `seqs ${compact(seqs)}`);
      if (m.event_seq !== evs.length) v('dense unique event ids', ids, `messages.event_seq ${m.event_seq} but ${evs.length} events`);
      // The final answer equals the streamed deltas and the stored answer.
      const deltas = evs
        .filter((e) => e.event === 'agent_message')
        .map((e) => String(e.data.answer))
        .join('');
      const final = evs.find((e) => e.event === 'message');
      const replaced = evs.some((e) => e.event === 'message_replace');
      if (final && !replaced) {
        const answer = String(final.data.answer);
        // A turn that asked a human publishes the question as its answer without deltas (its status is
        // paused, or succeeded once the continuation exists).
        const askedHuman = evs.some((e) => e.event === 'human_input_required');
        if (answer !== deltas && !askedHuman)
          v(
            'final answer == deltas',
            ids,
            `message ${answer.length} chars, deltas ${deltas.length} chars; first difference at ${firstDiff(answer, deltas)}`,
          );
        if (answer !== m.answer)
          v(
            'final answer == stored answer',
            ids,
            `message ${answer.length} chars, messages.answer ${m.answer.length} chars; first difference at ${firstDiff(answer, m.answer)}`,
          );
      } else if (!final && m.status === 'succeeded') {
        v('final answer == deltas', ids, 'succeeded without a `message` event');
      }
    }

    // The client's received stream == the stored log.
    for (const s of input.streams ?? []) {
      const messageId = s.frames.find((f) => typeof f.data.message_id === 'string')?.data.message_id as string | undefined;
      if (!messageId) continue;
      const stored = byMessage.get(messageId) ?? [];
      const ids = { message_id: messageId };
      // Guards the audit itself: a turn the test streamed must be among the messages it examined.
      if (!messages.some((m) => m.id === messageId))
        v(
          'audit covers the test',
          ids,
          `the message is not among the ${messages.length} messages created since ${input.since.toISOString()}`,
        );
      const got = s.frames.map((f) => Number(f.id));
      if (
        !isDeepStrictEqual(
          got,
          got.map((_, i) => i + 1),
        )
      )
        v('client stream == stored log', ids, `client received ids ${compact(got)}`);
      const ended = s.frames.some((f) => TERMINAL.has(f.event ?? ''));
      if (ended && s.frames.length !== stored.length)
        v('client stream == stored log', ids, `client received ${s.frames.length} frames, the log holds ${stored.length}`);
      s.frames.forEach((f, i) => {
        const e = stored[i];
        if (!e || e.event !== f.event || !isDeepStrictEqual(e.data, f.data)) {
          if (
            !out.some(
              (x) => x.ids.message_id === messageId && x.invariant === 'client stream == stored log' && x.detail.startsWith('frame'),
            )
          )
            v(
              'client stream == stored log',
              ids,
              `frame ${i + 1} (${f.event}) differs from stored seq ${e?.seq ?? '-'} (${e?.event ?? 'missing'})`,
            );
        }
      });
    }

    // One backend run per idempotency key, and it is the run the api recorded.
    const runs = (
      await db.query<{ idempotency_key: string; n: number; run_ids: string[]; statuses: string[] }>(
        `select idempotency_key, count(*)::int as n, array_agg(run_id) as run_ids, array_agg(status) as statuses
           from agent_backend.runs where idempotency_key = any($1::text[]) group by idempotency_key`,
        [ids.map((id) => `message-${id}`)],
      )
    ).rows;
    for (const r of runs) {
      const messageId = r.idempotency_key.slice('message-'.length);
      const m = messages.find((x) => x.id === messageId)!;
      if (r.n !== 1) v('one backend run per idempotency key', { message_id: messageId }, `${r.n} runs: ${r.run_ids.join(', ')}`);
      if (m.backend_run_id && !r.run_ids.includes(m.backend_run_id))
        v(
          'one backend run per idempotency key',
          { message_id: messageId },
          `api recorded run ${m.backend_run_id}, backend has ${r.run_ids.join(', ')}`,
        );
      if (ENDED.has(m.status) && r.statuses.includes('running'))
        v(
          'no backend run left running',
          { message_id: messageId, run_id: r.run_ids.join(',') },
          `message ${m.status}, backend run still running`,
        );
    }

    // One credit-ledger row per billing request id; tokens == ledger where billed.
    const runIds = messages.map((m) => m.backend_run_id).filter((x): x is string => !!x);
    const dupBilling = (
      await db.query<{ billing_request_id: string; n: number }>(
        `select billing_request_id, count(*)::int as n from credit_ledger where agent_run_id = any($1::text[]) group by 1 having count(*) > 1`,
        [runIds],
      )
    ).rows;
    for (const d of dupBilling) v('one ledger row per billing request id', { billing_request_id: d.billing_request_id }, `${d.n} rows`);
    const ledger = (
      await db.query<{ agent_run_id: string; tokens: number; rows: number }>(
        `select agent_run_id, sum(prompt_tokens + completion_tokens)::int as tokens, count(*)::int as rows from credit_ledger where agent_run_id = any($1::text[]) group by 1`,
        [runIds],
      )
    ).rows;
    // Every terminal status (issue 30: a failed turn's usage is what was billed, too), and the terminal event's
    // metadata shows the message's figures.
    for (const m of messages) {
      if (!m.backend_run_id || !ENDED.has(m.status)) continue;
      const l = ledger.find((x) => x.agent_run_id === m.backend_run_id);
      if ((l?.tokens ?? 0) !== m.total_tokens)
        v(
          'message tokens == ledger tokens',
          { message_id: m.id, run_id: m.backend_run_id },
          `message ${m.status} total_tokens ${m.total_tokens}, ledger ${l?.tokens ?? 0} over ${l?.rows ?? 0} rows`,
        );
      const terminal = (byMessage.get(m.id) ?? []).find((e) => TERMINAL.has(e.event));
      const published = (terminal?.data.metadata as { usage?: { total_tokens?: number } } | undefined)?.usage?.total_tokens;
      if (terminal && published !== m.total_tokens)
        v(
          'message tokens == ledger tokens',
          { message_id: m.id },
          `${terminal.event} metadata.usage.total_tokens ${published ?? 'missing'}, message total_tokens ${m.total_tokens}`,
        );
    }

    // No duplicate thoughts, no duplicate tool calls.
    const dupThoughts = (
      await db.query<{ message_id: string; position: number; n: number }>(
        `select message_id, position, count(*)::int as n from message_agent_thoughts where message_id = any($1::uuid[]) group by 1, 2 having count(*) > 1`,
        [ids],
      )
    ).rows;
    for (const d of dupThoughts) v('no duplicate thoughts', { message_id: d.message_id }, `position ${d.position} ${d.n} times`);
    const dupTools = (
      await db.query<{ message_id: string; tool_call_id: string; n: number }>(
        `select message_id, tool_call_id, count(*)::int as n from message_agent_thoughts
          where message_id = any($1::uuid[]) and tool_call_id is not null group by 1, 2 having count(*) > 1`,
        [ids],
      )
    ).rows;
    for (const d of dupTools) v('no duplicate tool calls', { message_id: d.message_id }, `tool_call_id ${d.tool_call_id} ${d.n} times`);

    // No conversation lock held without a turn in flight.
    const locks = (
      await db.query<{ id: string; active_message_id: string }>(
        `select id, active_message_id from conversations where active_message_id is not null and id = any($1::uuid[])`,
        [[...new Set(messages.map((m) => m.conversation_id))]],
      )
    ).rows;
    for (const c of locks) {
      const m = messages.find((x) => x.id === c.active_message_id);
      const inFlight = m && (waitingMessage.has(m.id) || (!ENDED.has(m.status) && inFlightWorkflow.has(m.workflow_id)));
      if (!inFlight)
        v(
          'no conversation lock held',
          { conversation_id: c.id, active_message_id: c.active_message_id },
          `held by a message in status ${m?.status ?? 'unknown'} with no turn in flight`,
        );
    }

    // Every credit pool's balance equals its ledger.
    const pools = (
      await db.query<{ id: string; quota_used: string; ledger: string }>(
        `select p.id, p.quota_used::text, coalesce((select sum(credits) from credit_ledger l where l.pool_id = p.id), 0)::text as ledger from credit_pools p`,
      )
    ).rows;
    for (const p of pools)
      if (p.quota_used !== p.ledger) v('credit pool == ledger', { pool_id: p.id }, `quota_used ${p.quota_used}, ledger ${p.ledger}`);
  } finally {
    await db.end();
  }
  return out;
}

/**
 * The audit after a test: a turn's workflow completes (and its lock is released) a moment after the client saw
 * message_end, so violations get a bounded time to settle (30 s); one that persists fails the test.
 */
export async function assertAuditClean(input: AuditInput): Promise<void> {
  const settleUntil = Date.now() + 30_000;
  let violations = await audit(input);
  while (violations.length && Date.now() < settleUntil) {
    await new Promise((r) => setTimeout(r, 1000));
    violations = await audit(input);
  }
  if (violations.length) throw new Error(`audit: ${violations.length} violation(s):\n${formatViolations(violations)}`);
}

export function formatViolations(vs: Violation[]): string {
  return vs
    .map(
      (x) =>
        `- ${x.invariant} [${Object.entries(x.ids)
          .map(([k, val]) => `${k}=${val}`)
          .join(' ')}]: ${x.detail}`,
    )
    .join('\n');
}

function compact(ns: number[]): string {
  return ns.length > 12 ? `${ns.slice(0, 6).join(',')},…,${ns.slice(-4).join(',')} (${ns.length})` : ns.join(',');
}

function firstDiff(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return `char ${i} (${JSON.stringify(a.slice(i, i + 30))} vs ${JSON.stringify(b.slice(i, i + 30))})`;
}
