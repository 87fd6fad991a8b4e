/**
 * The deterministic demo model: offline, no randomness, no clock in its text. It streams word-ish
 * tokens with a per-token delay, counts tokens by a fixed rule, reads the whole conversation
 * (history questions, tool results, ask_human answers) and obeys the triggers of DEMO_MODEL.md.
 *
 * Why one file: the demo model is one deterministic grammar of triggers (DEMO_MODEL.md); its parts mean nothing apart.
 */
import type { PromptMessage, ToolCall, ToolDefinition } from '../../../protocol/inner-llm.js';
import { InvokeError, isInvokeErrorKind, type InvokeErrorKind } from '../errors.js';
import { BUILTIN_CATALOGUE, type ModelCatalogue } from '../catalogue/index.js';
import {
  contentText,
  modelInfoOf,
  sleep,
  type LlmProvider,
  type ModelInfo,
  type ProviderEvent,
  type ProviderInvokeRequest,
} from '../provider.js';
import { parseKnowledgeBlock } from '../../../protocol/context-block.js';
import { demoSuggestedQuestions, isSuggestedQuestionsPrompt } from '../suggested-prompt.js';

export const DEMO_PROVIDER = 'demo';

/** Triggers recognised at the start of the latest user message (documented in core/domain/llm/DEMO_MODEL.md). */
export const DEMO_TRIGGERS = [
  { trigger: '/tool <name> <json-args>', effect: 'calls the tool <name> (when offered in `tools`) with the JSON arguments' },
  { trigger: '/calc <expr>', effect: 'calls `calculator` with {expression: <expr>}' },
  { trigger: '/time', effect: 'calls `current_time` with {}' },
  {
    trigger: '/sh <command>',
    effect: 'calls `shell` with {command: <command>} (the rest of the first line), then answers with the exit code, stdout and stderr',
  },
  { trigger: '/ask <question>', effect: 'calls `ask_human` with a one-field form (paragraph `answer`) and a Submit action' },
  { trigger: '/think <rest>', effect: 'streams reasoning_content first, then answers <rest>' },
  { trigger: '/long <n>', effect: 'answers with exactly n tokens of text' },
  { trigger: '/fail <error_type>', effect: 'streams a few tokens, then fails with that InvokeError kind' },
  { trigger: '/slow <ms> <rest>', effect: 'answers <rest> with a per-token delay of <ms>' },
  { trigger: '/echo-history', effect: 'lists every user message of the conversation' },
  { trigger: '/echo <text>', effect: 'answers <text> verbatim (every line after the trigger: Markdown, HTML, anything)' },
  {
    trigger: '/chain <json-steps>',
    effect:
      'calls the tools of a JSON array [{tool, args}, …] one after another in the same turn; an argument "$prev" (or "$prev.<field>") ' +
      'is the previous observation (or its field), then answers with the last observation',
  },
  {
    trigger: '/kb <question>',
    effect: 'answers with the knowledge passages the user message carries (docs/knowledge.md), each cited by its number ([1])',
  },
] as const;

export interface DemoProviderOptions {
  /** Delay before each streamed token, ms (0 = as fast as possible). */
  tokenDelayMs: number;
  /** The catalogue with the deployment's overrides (a demo model's prices may be overridden like any other's). */
  catalogue?: ModelCatalogue;
}

/** demo-chat (vision) and demo-text (text only), from catalogue/demo.json. */
const MODELS: ModelInfo[] = BUILTIN_CATALOGUE.list(DEMO_PROVIDER).map(modelInfoOf);

const MAX_LONG_TOKENS = 100_000;
const MAX_SLOW_MS = 60_000;
const QUOTE_LIMIT = 500;
const KB_PASSAGE_LIMIT = 2000;

export function createDemoProvider(opts: DemoProviderOptions): LlmProvider {
  const models = opts.catalogue ? opts.catalogue.list(DEMO_PROVIDER).map(modelInfoOf) : MODELS;
  return {
    name: DEMO_PROVIDER,
    models: () => models.map((m) => ({ ...m })),
    resolveModel: (model) => models.find((m) => m.model === model),
    hasSystemCredentials: () => true,
    parseCredentials: (raw) => {
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('credentials: expected an object');
      return raw as Record<string, unknown>;
    },
    invoke: (req) => streamDemo(req, opts.tokenDelayMs),
    embed: async (req) => {
      if (req.model !== DEMO_EMBEDDING_MODEL)
        throw new InvokeError('InvokeBadRequestError', `the demo provider has no embedding model ${req.model}`);
      return req.texts.map(demoEmbedding);
    },
  };
}

// ---- embeddings ------------------------------------------------------------------------------

export const DEMO_EMBEDDING_MODEL = 'demo-embedding';
export const DEMO_EMBEDDING_DIMENSIONS = 256;

/**
 * A deterministic embedding (DEMO_MODEL.md): a hashed bag of lowercase words and of their character trigrams
 * (so a typo still shares most features), signed, L2-normalised. Texts sharing words point the same way.
 */
export function demoEmbedding(text: string): number[] {
  const v = new Array<number>(DEMO_EMBEDDING_DIMENSIONS).fill(0);
  const add = (feature: string, weight: number) => {
    const h = fnv1a(feature);
    v[h % DEMO_EMBEDDING_DIMENSIONS]! += (h & 0x80000000 ? -1 : 1) * weight;
  };
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    add(`w:${word}`, 1);
    const padded = ` ${word} `;
    for (let i = 0; i + 3 <= padded.length; i++) add(`t:${padded.slice(i, i + 3)}`, 0.5);
  }
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm ? v.map((x) => x / norm) : v;
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

// ---- tokens ----------------------------------------------------------------------------------

/** Deterministic token count: each run of letters/digits/underscore is one token, each other non-space char one. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}_]+|[^\p{L}\p{N}_\s]/gu)?.length ?? 0;
}

/** Streaming pieces: each word with its trailing whitespace; concatenated they give the text back. */
export function streamPieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

export function countPromptTokens(messages: PromptMessage[]): number {
  let n = 0;
  for (const m of messages) {
    n += countTokens(contentText(m.content));
    if (m.role === 'assistant') {
      n += countTokens(m.reasoning_content ?? '');
      for (const c of m.tool_calls ?? []) n += countTokens(c.function.name) + countTokens(c.function.arguments);
    }
  }
  return n;
}

// ---- what to answer --------------------------------------------------------------------------

export interface DemoPlan {
  reasoning?: string;
  text: string;
  tool_call?: { name: string; args: Record<string, unknown> };
  /** Fail with this kind after streaming `text`. */
  fail?: InvokeErrorKind;
  delayMs?: number;
}

interface Ctx {
  tools: ToolDefinition[];
  /** Texts of all user messages, oldest first, the latest included. */
  userTexts: string[];
  latestHasImages: number;
  /** The knowledge passages appended to the latest user message (null: none were). */
  knowledge: { n: number; label: string; content: string }[] | null;
}

/** Decide the reply to a conversation (pure; exported for tests). */
export function planDemoReply(messages: PromptMessage[], tools: ToolDefinition[]): DemoPlan {
  // The api's own request for follow-up questions (GET /v1/messages/{id}/suggested): its JSON array, deterministic.
  if (isSuggestedQuestionsPrompt(messages)) return { text: demoSuggestedQuestions(messages) };
  const last = messages[messages.length - 1];
  const chained = last?.role === 'tool' ? nextChainStep(messages, tools) : null;
  if (chained) return chained;
  if (last?.role === 'tool') return { text: summariseToolResults(messages) };
  const users = messages.filter((m): m is Extract<PromptMessage, { role: 'user' }> => m.role === 'user');
  const latest = users[users.length - 1];
  const images = latest && typeof latest.content !== 'string' ? latest.content.filter((p) => p.type === 'image').length : 0;
  // What each user wrote, without the knowledge passages the backend appended (core/protocol/context-block.ts).
  const parsed = users.map((u) => parseKnowledgeBlock(contentText(u.content)));
  const ctx: Ctx = {
    tools,
    userTexts: parsed.map((p) => p.query.trim()),
    latestHasImages: images,
    knowledge: parsed[parsed.length - 1]?.passages ?? null,
  };
  const query = ctx.userTexts[ctx.userTexts.length - 1] ?? '';
  return planForQuery(query, ctx);
}

function planForQuery(query: string, ctx: Ctx): DemoPlan {
  const [head = '', ...restWords] = query.split(/\s+/);
  const rest = query.slice(head.length).trim();
  switch (head.toLowerCase()) {
    case '/think': {
      const inner = planForQuery(rest, ctx);
      const earlier = ctx.userTexts.length - 1;
      const reasoning =
        `The user asks: "${quote(rest)}". I remember ${plural(earlier, 'earlier message')} ` +
        `and can use ${plural(ctx.tools.length, 'tool')}. I will answer now.`;
      return { ...inner, reasoning };
    }
    case '/slow': {
      const ms = Number(restWords[0]);
      const inner = planForQuery(rest.slice((restWords[0] ?? '').length).trim(), ctx);
      return Number.isFinite(ms) && ms >= 0 ? { ...inner, delayMs: Math.min(ms, MAX_SLOW_MS) } : inner;
    }
    case '/fail': {
      const kind = restWords[0] && isInvokeErrorKind(restWords[0]) ? restWords[0] : 'InvokeError';
      return { text: 'Working on it, please wait ', fail: kind };
    }
    case '/long': {
      const n = Math.max(0, Math.min(MAX_LONG_TOKENS, Math.floor(Number(restWords[0]) || 0)));
      return { text: longText(n) };
    }
    case '/kb': {
      if (!ctx.knowledge?.length) return { text: `The knowledge base gave me nothing for "${quote(rest)}".` };
      // Each passage cited by its number, as the knowledge block asks (the citations under the answer name the source).
      const cited = ctx.knowledge.map((p) => `${p.content.replace(/\s+/g, ' ').slice(0, KB_PASSAGE_LIMIT)} [${p.n}]`);
      return { text: `From the knowledge base: ${cited.join(' ')}` };
    }
    case '/echo':
      // Verbatim, newlines and all (the pages' Markdown tests): what follows "/echo" and one space or newline.
      return { text: query.slice(head.length).replace(/^[ \t]?\r?\n?/, '') };
    case '/echo-history':
      return { text: `Your messages so far:\n${ctx.userTexts.map((t, i) => `${i + 1}. "${quote(t)}"`).join('\n')}` };
    case '/tool': {
      const name = restWords[0] ?? '';
      const json = rest.slice(name.length).trim();
      let args: unknown = {};
      if (json) {
        try {
          args = JSON.parse(json);
        } catch {
          return { text: `I could not parse the arguments of /tool ${name}: ${json} is not JSON.` };
        }
      }
      if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        return { text: `The arguments of /tool ${name} must be a JSON object.` };
      }
      return callTool(name, args as Record<string, unknown>, ctx);
    }
    case '/chain': {
      const steps = parseChain(rest);
      if (typeof steps === 'string') return { text: steps };
      return callTool(steps[0]!.tool, steps[0]!.args, ctx);
    }
    case '/calc': {
      const tool = ctx.tools.find((t) => t.name === 'calculator');
      return callTool('calculator', { [tool ? (singleProperty(tool) ?? 'expression') : 'expression']: rest }, ctx);
    }
    case '/time':
      return callTool('current_time', {}, ctx);
    case '/sh':
      // The first line only: the api may append a list of attached files to the message.
      return callTool('shell', { command: rest.split('\n')[0]!.trim() }, ctx);
    case '/ask':
      return callTool(
        'ask_human',
        {
          question: rest || 'Could you tell me more?',
          fields: [{ type: 'paragraph', name: 'answer', label: 'Answer', required: true }],
          actions: [{ id: 'submit', label: 'Submit', style: 'primary' }],
        },
        ctx,
      );
    default:
      return { text: defaultReply(query, ctx) };
  }
}

interface ChainStep {
  tool: string;
  args: Record<string, unknown>;
}

/** `/chain [{tool, args}, …]`: the steps, or why they cannot be run (the answer). */
function parseChain(json: string): ChainStep[] | string {
  const steps = tryJson(json);
  const valid =
    Array.isArray(steps) &&
    steps.length > 0 &&
    steps.every((st) => isRecord(st) && typeof st.tool === 'string' && (st.args === undefined || isRecord(st.args)));
  if (!valid) return `The steps of /chain must be a JSON array of {"tool": name, "args": {…}}: ${json} is not.`;
  return (steps as Record<string, unknown>[]).map((st) => ({ tool: st.tool as string, args: (st.args ?? {}) as Record<string, unknown> }));
}

/**
 * The next call of a `/chain` turn, once the previous step's observation is in (null: not a chain, or its last step
 * is done). The step is the number of tool results since the user's message; "$prev" / "$prev.<field>" in its
 * arguments become the previous observation (its text) or that field of it (parsed as JSON).
 */
function nextChainStep(messages: PromptMessage[], tools: ToolDefinition[]): DemoPlan | null {
  let u = messages.length - 1;
  while (u >= 0 && messages[u]!.role !== 'user') u--;
  const user = messages[u];
  if (user?.role !== 'user') return null;
  const query = parseKnowledgeBlock(contentText(user.content)).query.trim();
  if (!/^\/chain\s/i.test(query)) return null;
  const steps = parseChain(query.slice('/chain'.length).trim());
  const done = messages.slice(u + 1).filter((m) => m.role === 'tool').length;
  if (typeof steps === 'string' || done >= steps.length) return null;
  const previous = messages[messages.length - 1] as Extract<PromptMessage, { role: 'tool' }>;
  const parsed = tryJson(previous.content);
  const fill = (v: unknown): unknown => {
    if (v === '$prev') return previous.content;
    if (typeof v === 'string' && v.startsWith('$prev.')) return isRecord(parsed) ? parsed[v.slice('$prev.'.length)] : undefined;
    return v;
  };
  const step = steps[done]!;
  const args = Object.fromEntries(Object.entries(step.args).map(([k, v]) => [k, fill(v)]));
  const ctx: Ctx = { tools, userTexts: [], latestHasImages: 0, knowledge: null };
  return callTool(step.tool, args, ctx);
}

function callTool(name: string, args: Record<string, unknown>, ctx: Ctx): DemoPlan {
  if (!ctx.tools.some((t) => t.name === name)) {
    const offered = ctx.tools.map((t) => t.name);
    return {
      text: `I cannot call "${name}": it is not among my tools (${offered.length ? offered.join(', ') : 'none'}).`,
    };
  }
  return { text: '', tool_call: { name, args } };
}

function defaultReply(query: string, ctx: Ctx): string {
  const earlier = ctx.userTexts.slice(0, -1);
  const first = earlier[0];
  const previous = earlier[earlier.length - 1];
  if (/\bfirst (message|thing|question)\b/i.test(query)) {
    return first === undefined ? `This is your first message: "${quote(query)}".` : `Your first message was: "${quote(first)}".`;
  }
  if (/\b(what did i (just )?(say|write|ask)|previous message|last message|said (earlier|before))\b/i.test(query)) {
    return previous === undefined ? `You have not said anything before this message.` : `Earlier you said: "${quote(previous)}".`;
  }
  let memory: string;
  if (first === undefined) memory = '(This is the first message I remember.)';
  else if (earlier.length === 1) memory = `(I remember 1 earlier message: "${quote(first)}")`;
  else memory = `(I remember ${earlier.length} earlier messages; the first was: "${quote(first)}")`;
  const seen = ctx.latestHasImages ? ` I see ${plural(ctx.latestHasImages, 'image')}.` : '';
  return `You said: "${quote(query)}". ${memory}${seen}`;
}

/** The answer after tool results: one sentence per trailing tool message. */
function summariseToolResults(messages: PromptMessage[]): string {
  const calls = new Map<string, ToolCall>();
  for (const m of messages) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) calls.set(c.id, c);
  const results: Extract<PromptMessage, { role: 'tool' }>[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== 'tool') break;
    results.unshift(m);
  }
  return results
    .map((r) => {
      const name = r.name ?? calls.get(r.tool_call_id)?.function.name ?? 'tool';
      return summariseOne(name, r.content);
    })
    .join(' ');
}

function summariseOne(tool: string, content: string): string {
  const parsed = tryJson(content);
  if (tool === 'ask_human') return summariseHumanAnswer(parsed, content);
  if (tool === 'shell') return summariseShell(parsed, content);
  const observation = observationText(parsed, content);
  if (tool === 'calculator') return `The calculator says ${observation}.`;
  if (tool === 'current_time') return `The current time is ${observation}.`;
  return `The ${tool} tool returned: ${observation}.`;
}

const SHELL_STREAM_LIMIT = 4000;

/** The shell observation as the user should see it: exit code (or failure), then stdout and stderr verbatim. */
function summariseShell(parsed: unknown, raw: string): string {
  if (!isRecord(parsed)) return `The shell tool returned: ${quote(raw)}.`;
  const streams = ['stdout', 'stderr']
    .map((k) => {
      const v = typeof parsed[k] === 'string' ? (parsed[k] as string) : '';
      if (!v) return '';
      const cut = v.length > SHELL_STREAM_LIMIT ? `${v.slice(0, SHELL_STREAM_LIMIT)}…` : v;
      return `\n${k}:\n${cut.replace(/\s+$/, '')}`;
    })
    .join('');
  if (typeof parsed.exit_code === 'number') return `The command exited with code ${parsed.exit_code}.${streams}`;
  const message = typeof parsed.message === 'string' ? parsed.message : String(parsed.error ?? 'unknown error');
  return `The command did not complete (${String(parsed.error ?? 'error')}): ${message}${streams}`;
}

function summariseHumanAnswer(parsed: unknown, raw: string): string {
  if (!isRecord(parsed)) return `The human replied: "${quote(raw)}".`;
  if (parsed.status === 'timeout') return 'Nobody answered the question in time, so I will continue without an answer.';
  if (parsed.status === 'unavailable') return 'The question was withdrawn, so I will continue without an answer.';
  const values = isRecord(parsed.values) ? parsed.values : {};
  const action = isRecord(parsed.action) && typeof parsed.action.label === 'string' ? parsed.action.label : undefined;
  const entries = Object.entries(values);
  const answer = values.answer;
  const via = action ? ` (you chose "${action}")` : '';
  if (typeof answer === 'string' && entries.length === 1) return `Thanks! You answered: "${quote(answer)}"${via}.`;
  if (entries.length === 0) return `Thanks! You submitted the form without values${via}.`;
  return `Thanks! You submitted ${entries.map(([k, v]) => `${k} = "${quote(String(v))}"`).join(', ')}${via}.`;
}

function observationText(parsed: unknown, raw: string): string {
  if (typeof parsed === 'number' || typeof parsed === 'string' || typeof parsed === 'boolean') return String(parsed);
  if (isRecord(parsed)) {
    for (const key of ['result', 'value', 'output', 'time', 'current_time']) {
      const v = parsed[key];
      if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return String(v);
    }
  }
  return raw.trim().replace(/\.$/, '');
}

const LONG_WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliett'];

function longText(n: number): string {
  const words: string[] = [];
  for (let i = 0; i < n; i++) words.push(LONG_WORDS[i % LONG_WORDS.length]);
  return words.join(' ');
}

/** The name of a tool's only parameter, so `/calc` adapts to however `calculator` names it. */
function singleProperty(tool: ToolDefinition): string | undefined {
  const props = tool.parameters.properties;
  if (!isRecord(props)) return undefined;
  const keys = Object.keys(props);
  return keys.length === 1 ? keys[0] : undefined;
}

function quote(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > QUOTE_LIMIT ? `${t.slice(0, QUOTE_LIMIT)}…` : t;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// ---- streaming -------------------------------------------------------------------------------

async function* streamDemo(req: ProviderInvokeRequest, defaultDelayMs: number): AsyncGenerator<ProviderEvent> {
  const plan = planDemoReply(req.prompt_messages, req.tools);
  const delay = plan.delayMs ?? defaultDelayMs;
  const maxTokens = positiveInt(req.model_parameters.max_tokens);
  let completion = 0;
  let truncated = false;

  for (const [field, text] of [
    ['reasoning_content', plan.reasoning ?? ''],
    ['content', plan.text],
  ] as const) {
    for (const piece of streamPieces(text)) {
      const n = countTokens(piece);
      if (maxTokens !== undefined && completion + n > maxTokens) {
        truncated = true;
        break;
      }
      await sleep(delay, req.signal);
      completion += n;
      yield { type: 'delta', [field]: piece };
    }
    if (truncated) break;
  }
  if (plan.fail) throw new InvokeError(plan.fail, `demo model failure requested by /fail (${plan.fail})`);

  let finish: 'stop' | 'length' | 'tool_calls' = truncated ? 'length' : 'stop';
  if (plan.tool_call && !truncated) {
    await sleep(delay, req.signal);
    const args = JSON.stringify(plan.tool_call.args);
    const call: ToolCall = {
      id: `call_demo_${req.prompt_messages.length}_0`,
      type: 'function',
      function: { name: plan.tool_call.name, arguments: args },
    };
    completion += countTokens(plan.tool_call.name) + countTokens(args);
    yield { type: 'delta', tool_calls: [call] };
    finish = 'tool_calls';
  }
  yield {
    type: 'finish',
    finish_reason: finish,
    usage: { prompt_tokens: countPromptTokens(req.prompt_messages), completion_tokens: completion },
  };
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}
