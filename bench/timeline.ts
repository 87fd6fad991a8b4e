/**
 * Where a turn's time goes, from timestamps the system already records — no instrumentation in the
 * code under test: the client's stopwatch, PostgreSQL row times (messages, agent_backend_runs,
 * message_events, agent_backend.runs / events) and the workflow's Temporal history (event times of the
 * workflow start, workflow tasks and each activity). Same machine, same clock.
 *
 * Row times are `now()` of the writing transaction, i.e. its start; the transaction's commit is when
 * its NOTIFY reaches this process (CommitRecorder), which splits writing an event from fanning it out.
 *
 * Why one file: the durable and direct timelines are built from the same row and history facts, side by side.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { TurnSample } from './client.js';
import type { CommitRecorder, DbProbe } from './probes.js';
import { distribution, median, type Distribution } from './stats.js';

/**
 * Segments of the path to the first answer token, in order; each is ms. The workflow's steps are today's
 * (workflows/agent-turn.ts): the runAgent activity, which prepares the turn (resolve-config, input-guards, binding,
 * build-request) before it creates the backend run. Turns started before the `prepare-in-run-agent` patch (and the
 * floor) still have a local activity (prepareTurn) in the first workflow task: `prepare_turn` is that, when present.
 */
export const DURABLE_SEGMENTS = [
  ['api', 'client send → Message row (HTTP, auth, end user, conversation tx)'],
  ['workflow_start', 'Message row → WorkflowExecutionStarted (tx commit, StartWorkflowExecution)'],
  ['first_task', 'workflow started → first workflow task started (eager start: handed back with the start)'],
  [
    'prepare_turn',
    'first task started → prepareTurn done (activation; local activity: resolve-config, input-guards, binding, build-request)',
  ],
  ['first_task_completion', 'first task started (or its local activity done) → runAgent scheduled (activation, task completion)'],
  ['run_agent_dispatch', 'runAgent scheduled → started'],
  ['backend_create', "runAgent started → backend run row (the turn's preparation, load message, POST /runs)"],
  ['model_first_delta', 'backend run row → first agent_message_delta row (inner LLM, demo model, backend coalescing)'],
  ['debounce', 'first backend delta row → first agent_message tx start (runAgent SSE read, debounce)'],
  ['write', 'event tx start → its commit (NOTIFY seen)'],
  ['fanout', 'commit → client (NOTIFY, read rows, SSE write, client parse)'],
] as const;

export const DIRECT_SEGMENTS = [
  ['backend_create', 'client send → backend run row (POST /runs)'],
  ['model_first_delta', 'backend run row → first agent_message_delta row (inner LLM, demo model, backend coalescing)'],
  ['write', 'event tx start → its commit (NOTIFY seen)'],
  ['fanout', 'commit → client (NOTIFY, read rows, SSE write, client parse)'],
] as const;

/** The floor (bench/floor.ts): the same Temporal steps with nothing in them; workflow_start is from the client's start call. */
export const FLOOR_SEGMENTS = [
  ['workflow_start', 'client start call → WorkflowExecutionStarted'],
  ['first_task', 'workflow started → first workflow task started'],
  ['prepare_turn', 'first task started → local activity done (activation, an empty local activity)'],
  ['first_task_completion', 'local activity done → activity scheduled'],
  ['run_agent_dispatch', 'activity scheduled → started'],
] as const;

export type SegmentName = (typeof DURABLE_SEGMENTS)[number][0] | (typeof DIRECT_SEGMENTS)[number][0];
export type SegmentList = readonly (readonly [SegmentName, string])[];

export interface TurnTimeline {
  segments: Partial<Record<SegmentName, number>>;
  /** Durable turns: each activity's dispatch (scheduled → started) and execution (started → completed). */
  activities?: { name: string; dispatchMs: number; execMs: number }[];
  /** Durable turns: each workflow task's schedule → start and start → complete. */
  workflowTasks?: { scheduleToStartMs: number; startToCompleteMs: number }[];
  historyEvents?: number;
  /** Backend terminal event row → client end (durable: through the message_end row). */
  endTail?: number;
  /** Durable and floor turns: runAgent (the activity) completed → workflow closed (turn-end: releaseTurn, last task). */
  turnEnd?: number;
}

export interface TimelineSummary {
  turns: number;
  /** Median of each segment, ms. */
  segments: Partial<Record<SegmentName, number | null>>;
  /** Median of the per-turn sum of segments (≈ time to first token). */
  total: number | null;
  /** Median per activity. */
  activities?: Record<string, { dispatchMs: number | null; execMs: number | null }>;
  /** Median over every workflow task of every turn; `longestMs` / `over1s`: the longest schedule→complete of the sampled
   * turns' tasks and how many took over a second (issue 21's c=64 criterion). */
  workflowTask?: {
    perTurn: number | null;
    scheduleToStartMs: number | null;
    startToCompleteMs: number | null;
    longestMs?: number | null;
    over1s?: number;
  };
  historyEvents?: number | null;
  endTail: number | null;
  turnEnd?: number | null;
  /** Every SSE frame: its row's transaction start → arrival at the client. */
  frameLag: Distribution;
}

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

function tsMs(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  if (!t) return NaN;
  const s = t.seconds as number | { toNumber(): number } | null | undefined;
  const secs = typeof s === 'number' ? s : s ? s.toNumber() : 0;
  return secs * 1000 + (t.nanos ?? 0) / 1e6;
}

interface HistoryFacts {
  started: number;
  firstTaskStarted: number;
  /** Workflow closed (completed, failed, ...). */
  closed: number;
  activities: { name: string; scheduled: number; started: number; completed: number }[];
  /** Local activities: their markers carry the worker's completion time, no start (they run inside a workflow task). */
  localActivities: { name: string; completed: number }[];
  workflowTasks: { scheduled: number; started: number; completed: number }[];
  events: number;
}

function historyFacts(h: History): HistoryFacts {
  const events = h.events ?? [];
  const acts = new Map<string, HistoryFacts['activities'][number]>();
  const tasks = new Map<string, HistoryFacts['workflowTasks'][number]>();
  const localActivities: HistoryFacts['localActivities'] = [];
  let started = NaN;
  let closed = NaN;
  for (const e of events) {
    const at = tsMs(e.eventTime);
    const id = String(e.eventId);
    if (e.workflowExecutionStartedEventAttributes) started = at;
    if (
      e.workflowExecutionCompletedEventAttributes ||
      e.workflowExecutionFailedEventAttributes ||
      e.workflowExecutionCanceledEventAttributes ||
      e.workflowExecutionTerminatedEventAttributes
    )
      closed = at;
    const la = localActivityMarker(e.markerRecordedEventAttributes);
    if (la) localActivities.push(la);
    // A task's started/completed events point back at its scheduled event.
    const mark = <T extends { started: number; completed: number }>(
      m: Map<string, T>,
      scheduledEventId: unknown,
      field: 'started' | 'completed',
    ) => {
      const t = m.get(String(scheduledEventId));
      if (t) t[field] = at;
    };
    if (e.workflowTaskScheduledEventAttributes) tasks.set(id, { scheduled: at, started: NaN, completed: NaN });
    if (e.workflowTaskStartedEventAttributes) mark(tasks, e.workflowTaskStartedEventAttributes.scheduledEventId, 'started');
    if (e.workflowTaskCompletedEventAttributes) mark(tasks, e.workflowTaskCompletedEventAttributes.scheduledEventId, 'completed');
    const sch = e.activityTaskScheduledEventAttributes;
    if (sch) acts.set(id, { name: sch.activityType?.name ?? '?', scheduled: at, started: NaN, completed: NaN });
    if (e.activityTaskStartedEventAttributes) mark(acts, e.activityTaskStartedEventAttributes.scheduledEventId, 'started');
    if (e.activityTaskCompletedEventAttributes) mark(acts, e.activityTaskCompletedEventAttributes.scheduledEventId, 'completed');
  }
  const workflowTasks = [...tasks.values()];
  return {
    started,
    firstTaskStarted: workflowTasks[0]?.started ?? NaN,
    closed,
    activities: [...acts.values()],
    localActivities,
    workflowTasks,
    events: events.length,
  };
}

type Marker = NonNullable<History['events']>[number]['markerRecordedEventAttributes'];

/** A local activity's marker (sdk-core's `core_local_activity`: JSON with activity_type and complete_time). */
function localActivityMarker(m: Marker): { name: string; completed: number } | null {
  if (m?.markerName !== 'core_local_activity') return null;
  const data = m.details?.['data']?.payloads?.[0]?.data;
  if (!data) return null;
  try {
    const d = JSON.parse(Buffer.from(data).toString('utf8')) as {
      activity_type?: string;
      complete_time?: { seconds?: number; nanos?: number };
    };
    return { name: d.activity_type ?? '?', completed: tsMs(d.complete_time) };
  } catch {
    return null;
  }
}

/**
 * The Temporal part of a turn's path to its activity, the same for the durable turn and the floor: the first
 * task, the local activity in it (prepareTurn), the task's completion, the activity's dispatch.
 */
function workflowSegments(h: HistoryFacts, local: string, activity: string) {
  const act = h.activities.find((a) => a.name === activity);
  const prepared = h.localActivities.find((a) => a.name === local)?.completed;
  const ok = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v : undefined);
  return {
    act,
    segments: {
      first_task: ok(h.firstTaskStarted - h.started),
      prepare_turn: ok(prepared !== undefined ? prepared - h.firstTaskStarted : undefined),
      first_task_completion: ok(act ? act.scheduled - (prepared ?? h.firstTaskStarted) : undefined),
      run_agent_dispatch: ok(act ? act.started - act.scheduled : undefined),
    },
    turnEnd: ok(act ? h.closed - act.completed : undefined),
    activities: h.activities.map((a) => ({ name: a.name, dispatchMs: a.started - a.scheduled, execMs: a.completed - a.started })),
    workflowTasks: h.workflowTasks.map((t) => ({ scheduleToStartMs: t.started - t.scheduled, startToCompleteMs: t.completed - t.started })),
    historyEvents: h.events,
  };
}

const epoch = (col: string) => `extract(epoch from ${col}) * 1000`;

interface DurableRow {
  id: string;
  backend_run_id: string | null;
  msg_created: number;
  be_run_created: number | null;
  be_first_delta: number | null;
  be_terminal: number | null;
  ev_first_msg: number | null;
  ev_end: number | null;
}

export async function durableTimelines(
  temporal: Client,
  probe: DbProbe,
  commits: CommitRecorder,
  samples: TurnSample[],
): Promise<{ turns: TurnTimeline[]; frameLags: number[] }> {
  const ok = samples.filter((s) => s.ok && s.id);
  if (ok.length === 0) return { turns: [], frameLags: [] };
  const ids = ok.map((s) => s.id!);
  const rows = await probe.query<DurableRow>(
    `select m.id::text as id, r.backend_run_id, ${epoch('m.created_at')} as msg_created,
            ${epoch('br.created_at')} as be_run_created,
            (select ${epoch('min(e.created_at)')} from agent_backend.events e where e.run_id = r.backend_run_id and e.type = 'agent_message_delta') as be_first_delta,
            (select ${epoch('max(e.created_at)')} from agent_backend.events e where e.run_id = r.backend_run_id and e.type in ('run_succeeded', 'run_failed', 'run_cancelled')) as be_terminal,
            (select ${epoch('min(me.created_at)')} from message_events me where me.message_id = m.id and me.event = 'agent_message') as ev_first_msg,
            (select ${epoch('max(me.created_at)')} from message_events me where me.message_id = m.id and me.event = 'message_end') as ev_end
       from messages m
       join agent_backend_runs r on r.message_id = m.id
       left join agent_backend.runs br on br.run_id = r.backend_run_id
      where m.id = any($1::uuid[])`,
    [ids],
  );
  const byId = new Map(rows.rows.map((r) => [r.id, numbers(r)]));
  const eventRows = await probe.query<{ id: string; seq: number; at: number }>(
    `select message_id::text as id, seq, ${epoch('created_at')} as at from message_events where message_id = any($1::uuid[])`,
    [ids],
  );
  const frameLags = lags(ok, eventRows.rows);

  const turns: TurnTimeline[] = [];
  for (const s of ok) {
    const r = byId.get(s.id!);
    if (!r) continue;
    const h = historyFacts(await temporal.workflow.getHandle(`agent-turn-${s.id}`).fetchHistory());
    const wf = workflowSegments(h, 'prepareTurn', 'runAgent');
    const runAgent = wf.act;
    const firstAnswerAt = s.startAt + s.ttftMs!;
    const committed = r.ev_first_msg !== null ? commits.commitAfter(s.id!, r.ev_first_msg) : null;
    turns.push({
      segments: {
        api: r.msg_created - s.startAt,
        workflow_start: h.started - r.msg_created,
        ...wf.segments,
        backend_create: runAgent && r.be_run_created !== null ? r.be_run_created - runAgent.started : undefined,
        model_first_delta: r.be_run_created !== null && r.be_first_delta !== null ? r.be_first_delta - r.be_run_created : undefined,
        debounce: r.be_first_delta !== null && r.ev_first_msg !== null ? r.ev_first_msg - r.be_first_delta : undefined,
        write: committed !== null && r.ev_first_msg !== null ? committed - r.ev_first_msg : undefined,
        fanout: committed !== null ? firstAnswerAt - committed : undefined,
      },
      activities: wf.activities,
      workflowTasks: wf.workflowTasks,
      historyEvents: wf.historyEvents,
      endTail: r.be_terminal !== null ? s.startAt + s.endMs! - r.be_terminal : undefined,
      turnEnd: wf.turnEnd,
    });
  }
  return { turns, frameLags };
}

export async function directTimelines(
  probe: DbProbe,
  commits: CommitRecorder,
  samples: TurnSample[],
): Promise<{ turns: TurnTimeline[]; frameLags: number[] }> {
  const ok = samples.filter((s) => s.ok && s.id);
  if (ok.length === 0) return { turns: [], frameLags: [] };
  const ids = ok.map((s) => s.id!);
  const runs = await probe.query<{ id: string; created: number; first_delta: number | null; terminal: number | null }>(
    `select r.run_id as id, ${epoch('r.created_at')} as created,
            (select ${epoch('min(e.created_at)')} from agent_backend.events e where e.run_id = r.run_id and e.type = 'agent_message_delta') as first_delta,
            (select ${epoch('max(e.created_at)')} from agent_backend.events e where e.run_id = r.run_id and e.type in ('run_succeeded', 'run_failed', 'run_cancelled')) as terminal
       from agent_backend.runs r where r.run_id = any($1::text[])`,
    [ids],
  );
  const byId = new Map(runs.rows.map((r) => [r.id, numbers(r)]));
  const eventRows = await probe.query<{ id: string; seq: number; at: number }>(
    `select run_id as id, seq::int as seq, ${epoch('created_at')} as at from agent_backend.events where run_id = any($1::text[])`,
    [ids],
  );
  const frameLags = lags(ok, eventRows.rows);
  const turns: TurnTimeline[] = [];
  for (const s of ok) {
    const r = byId.get(s.id!);
    if (!r) continue;
    const committed = r.first_delta !== null ? commits.commitAfter(s.id!, r.first_delta) : null;
    turns.push({
      segments: {
        backend_create: r.created - s.startAt,
        model_first_delta: r.first_delta !== null ? r.first_delta - r.created : undefined,
        write: committed !== null && r.first_delta !== null ? committed - r.first_delta : undefined,
        fanout: committed !== null ? s.startAt + s.ttftMs! - committed : undefined,
      },
      endTail: r.terminal !== null ? s.startAt + s.endMs! - r.terminal : undefined,
    });
  }
  return { turns, frameLags };
}

/** The floor's turns (bench/floor.ts): their histories alone; the sample's id is the workflow id. */
export async function floorTimelines(temporal: Client, samples: TurnSample[]): Promise<{ turns: TurnTimeline[]; frameLags: number[] }> {
  const turns: TurnTimeline[] = [];
  for (const s of samples.filter((x) => x.ok && x.id)) {
    const h = historyFacts(await temporal.workflow.getHandle(s.id!).fetchHistory());
    const wf = workflowSegments(h, 'floorPrepare', 'floorRun');
    turns.push({
      segments: { workflow_start: h.started - s.startAt, ...wf.segments },
      activities: wf.activities,
      workflowTasks: wf.workflowTasks,
      historyEvents: wf.historyEvents,
      turnEnd: wf.turnEnd,
    });
  }
  return { turns, frameLags: [] };
}

export function summariseTimelines(turns: TurnTimeline[], frameLags: number[], names: SegmentList): TimelineSummary {
  const segments: TimelineSummary['segments'] = {};
  for (const [name] of names) segments[name] = round(median(turns.map((t) => t.segments[name]).filter(isNum)));
  const totals = turns.map((t) => names.reduce((acc, [n]) => acc + (t.segments[n] ?? 0), 0));
  const out: TimelineSummary = {
    turns: turns.length,
    segments,
    total: round(median(totals)),
    endTail: round(median(turns.map((t) => t.endTail).filter(isNum))),
    frameLag: roundDist(distribution(frameLags)),
  };
  if (turns.some((t) => t.activities)) {
    const acts: NonNullable<TimelineSummary['activities']> = {};
    const actNames = [...new Set(turns.flatMap((t) => (t.activities ?? []).map((a) => a.name)))];
    for (const n of actNames) {
      const all = turns.flatMap((t) => (t.activities ?? []).filter((a) => a.name === n));
      acts[n] = {
        dispatchMs: round(median(all.map((a) => a.dispatchMs).filter(isNum))),
        execMs: round(median(all.map((a) => a.execMs).filter(isNum))),
      };
    }
    out.activities = acts;
    const tasks = turns.flatMap((t) => t.workflowTasks ?? []);
    out.workflowTask = {
      perTurn: median(turns.map((t) => t.workflowTasks?.length).filter(isNum)),
      scheduleToStartMs: round(median(tasks.map((t) => t.scheduleToStartMs).filter(isNum))),
      startToCompleteMs: round(median(tasks.map((t) => t.startToCompleteMs).filter(isNum))),
      ...longestTasks(tasks.map((t) => t.scheduleToStartMs + t.startToCompleteMs).filter(isNum)),
    };
    out.historyEvents = median(turns.map((t) => t.historyEvents).filter(isNum));
    out.turnEnd = round(median(turns.map((t) => t.turnEnd).filter(isNum)));
  }
  return out;
}

function lags(samples: TurnSample[], rows: { id: string; seq: number; at: number }[]): number[] {
  const at = new Map(rows.map((r) => [`${r.id}#${Number(r.seq)}`, Number(r.at)]));
  const out: number[] = [];
  for (const s of samples) {
    for (const f of s.frameTimes) {
      const t = at.get(`${s.id}#${Number(f.id)}`);
      if (t !== undefined) out.push(f.at - t);
    }
  }
  return out;
}

function numbers<T extends object>(row: T): T {
  const out = { ...row } as Record<string, unknown>;
  for (const [k, v] of Object.entries(out)) if (k !== 'id' && k !== 'backend_run_id' && v !== null) out[k] = Number(v);
  return out as T;
}

function isNum(v: number | undefined | null): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function round(v: number | null): number | null {
  return v === null ? null : Math.round(v * 10) / 10;
}

function roundDist(d: Distribution): Distribution {
  return { n: d.n, p50: round(d.p50), p95: round(d.p95), p99: round(d.p99), max: round(d.max) };
}

function longestTasks(totals: number[]): { longestMs: number | null; over1s: number } {
  return { longestMs: totals.length ? round(Math.max(...totals)) : null, over1s: totals.filter((ms) => ms > 1000).length };
}
