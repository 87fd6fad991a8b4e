/**
 * `SCN:think` of the fake providers (fake-providers.ts): a thinking model that calls the calculator, and that
 * **enforces** its provider's documented rule for the next request, the tool-result turn: the assistant turn it sent
 * must come back with its reasoning exactly as issued, or the fake answers the provider's own error.
 *
 * - Anthropic (docs.claude.com, "Extended thinking" → "Preserving thinking blocks"): with `thinking` on, the last
 *   assistant message before a `tool_result` must start with its `thinking` / `redacted_thinking` blocks, and a
 *   thinking block's `signature` must be the one issued for that text → 400 `invalid_request_error` otherwise.
 * - Gemini (ai.google.dev "Thought signatures"): a `functionCall` part of the current turn must carry the
 *   `thoughtSignature` it came with → 400 `INVALID_ARGUMENT`; a signature not issued is "Corrupted".
 * - OpenAI Responses (platform.openai.com "Reasoning" → "Keeping reasoning items in context", `store: false`): nothing
 *   is stored, so an `item_reference` or a reasoning item without its `encrypted_content` is "not found" (404), and
 *   the `function_call` must come after the `reasoning` item it followed (400).
 *
 * Every signature any request sends back is checked against what this fake issued (earlier turns too), so a value
 * altered anywhere on the way (inner protocol, snapshot, request mapping) is refused.
 */
import crypto from 'node:crypto';

export const THINKING_TEXT = 'The user wants 6*7; I should use the calculator.';
export const THINK_ANSWER = 'The answer is 42.';

/** The call a thinking answer makes: the calculator (`SCN:think`) or ask_human (`SCN:thinkask`). */
export interface ThinkTool {
  name: string;
  args: Record<string, unknown>;
}
export const CALCULATOR_CALL: ThinkTool = { name: 'calculator', args: { expression: '6*7' } };
export const ASK_HUMAN_CALL: ThinkTool = {
  name: 'ask_human',
  args: {
    question: 'Which number should I multiply 6 by?',
    fields: [{ type: 'paragraph', name: 'answer', label: 'Answer', required: true }],
    actions: [{ id: 'submit', label: 'Submit', style: 'primary' }],
  },
};

/** What one fake issued, to check what comes back. */
export class ThinkingLedger {
  private n = 0;
  /** Anthropic: signature → the thinking text it signs. */
  readonly signatures = new Map<string, string>();
  readonly redacted = new Set<string>();
  /** Gemini: issued thought signatures. */
  readonly thoughtSignatures = new Set<string>();
  /** OpenAI: reasoning item id → its encrypted content. */
  readonly encrypted = new Map<string, string>();
  /** Refusals sent, for the test's failure messages. */
  readonly refusals: string[] = [];
  next(): number {
    return ++this.n;
  }
  sign(text: string): string {
    const sig = crypto.createHash('sha256').update(`${this.n}:${text}`).digest('base64');
    this.signatures.set(sig, text);
    return sig;
  }
}

export type ThinkOutcome =
  { kind: 'stream'; frames: (string | Uint8Array)[] } | { kind: 'error'; status: number; body: unknown; headers?: Record<string, string> };

const sse = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
const USAGE = { prompt: 20, completion: 10 };

// ---- Anthropic ------------------------------------------------------------------------------------------------

type AnthropicBlock = { type: string; thinking?: string; signature?: string; data?: string; text?: string; id?: string };
interface AnthropicBody {
  model: string;
  thinking?: { type: string; budget_tokens?: number };
  messages: { role: string; content: string | AnthropicBlock[] }[];
}

const anthropicError = (status: number, type: string, message: string): ThinkOutcome => ({
  kind: 'error',
  status,
  body: { type: 'error', error: { type, message } },
});

export function anthropicThink(ledger: ThinkingLedger, body: AnthropicBody, tool: ThinkTool = CALCULATOR_CALL): ThinkOutcome {
  if (body.thinking?.type !== 'enabled')
    return anthropicError(400, 'invalid_request_error', 'SCN:think needs `thinking` enabled (the agent’s thinking_budget)');
  const blocks = (m: AnthropicBody['messages'][number]) => (typeof m.content === 'string' ? [] : m.content);
  // Every thinking block sent back, from any turn, must carry the signature issued for its text.
  for (const [i, m] of body.messages.entries()) {
    for (const [j, b] of blocks(m).entries()) {
      if (b.type === 'thinking' && ledger.signatures.get(b.signature ?? '') !== b.thinking)
        return refuse(
          ledger,
          anthropicError(400, 'invalid_request_error', `messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`),
        );
      if (b.type === 'redacted_thinking' && !ledger.redacted.has(b.data ?? ''))
        return refuse(
          ledger,
          anthropicError(400, 'invalid_request_error', `messages.${i}.content.${j}: Invalid \`data\` in \`redacted_thinking\` block`),
        );
    }
  }
  const last = body.messages.at(-1)!;
  const toolTurn = blocks(last).some((b) => b.type === 'tool_result');
  const out: string[] = [];
  const ev = (type: string, data: Record<string, unknown>) => out.push(sse({ type, ...data }, type));
  ev('message_start', {
    message: {
      id: 'msg_think',
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: USAGE.prompt, output_tokens: 1 },
    },
  });
  if (toolTurn) {
    // The rule: the final assistant message (the one with the tool_use this result answers) starts with its thinking.
    const i = body.messages.length - 2;
    const first = blocks(body.messages[i]!)[0];
    if (first?.type !== 'thinking' && first?.type !== 'redacted_thinking')
      return refuse(
        ledger,
        anthropicError(
          400,
          'invalid_request_error',
          `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first?.type ?? 'nothing'}\`. ` +
            'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of ' +
            '`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this ' +
            'requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking',
        ),
      );
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: THINK_ANSWER } });
    ev('content_block_stop', { index: 0 });
    ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: USAGE.completion } });
    ev('message_stop', {});
    return { kind: 'stream', frames: out };
  }
  const n = ledger.next();
  const signature = ledger.sign(THINKING_TEXT);
  const redacted = `EncryptedRedactedThinking-${n}-${crypto.randomBytes(6).toString('hex')}`;
  ledger.redacted.add(redacted);
  ev('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } });
  for (const piece of THINKING_TEXT.match(/.{1,12}/gs)!)
    ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: piece } });
  ev('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature } });
  ev('content_block_stop', { index: 0 });
  ev('content_block_start', { index: 1, content_block: { type: 'redacted_thinking', data: redacted } });
  ev('content_block_stop', { index: 1 });
  const args = JSON.stringify(tool.args);
  ev('content_block_start', { index: 2, content_block: { type: 'tool_use', id: `toolu_think_${n}`, name: tool.name, input: {} } });
  ev('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: args.slice(0, 10) } });
  ev('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: args.slice(10) } });
  ev('content_block_stop', { index: 2 });
  ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: USAGE.completion } });
  ev('message_stop', {});
  return { kind: 'stream', frames: out };
}

// ---- Gemini ---------------------------------------------------------------------------------------------------

type GeminiPart = {
  text?: string;
  thought?: boolean;
  thoughtSignature?: string;
  functionCall?: { name: string };
  functionResponse?: unknown;
};
interface GeminiBody {
  contents: { role: string; parts: GeminiPart[] }[];
  generationConfig?: { thinkingConfig?: { includeThoughts?: boolean } };
}

const geminiError = (status: number, code: string, message: string): ThinkOutcome => ({
  kind: 'error',
  status,
  body: { error: { code: status, message, status: code } },
});

export function geminiThink(ledger: ThinkingLedger, body: GeminiBody, tool: ThinkTool = CALCULATOR_CALL): ThinkOutcome {
  if (!body.generationConfig?.thinkingConfig) return geminiError(400, 'INVALID_ARGUMENT', 'SCN:think needs thinkingConfig');
  for (const c of body.contents)
    for (const p of c.parts)
      if (p.thoughtSignature !== undefined && !ledger.thoughtSignatures.has(p.thoughtSignature))
        return refuse(ledger, geminiError(400, 'INVALID_ARGUMENT', 'Corrupted thought signature.'));
  const last = body.contents.at(-1)!;
  const toolTurn = last.parts.some((p) => p.functionResponse);
  const cand = (parts: unknown[], finishReason?: string) => ({
    content: { role: 'model', parts },
    ...(finishReason ? { finishReason } : {}),
    index: 0,
  });
  const usageMetadata = {
    promptTokenCount: USAGE.prompt,
    candidatesTokenCount: USAGE.completion,
    totalTokenCount: USAGE.prompt + USAGE.completion,
  };
  if (toolTurn) {
    const model = body.contents.at(-2);
    const position = (model?.parts ?? []).findIndex((p) => p.functionCall);
    const call = model?.parts[position];
    if (!call?.thoughtSignature)
      return refuse(
        ledger,
        geminiError(
          400,
          'INVALID_ARGUMENT',
          `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing ` +
            `thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${call?.functionCall?.name ?? '?'}\` , ` +
            `position ${position + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
        ),
      );
    const sig = `TS-answer-${ledger.next()}`;
    ledger.thoughtSignatures.add(sig);
    return {
      kind: 'stream',
      frames: [
        sse({ candidates: [cand([{ text: THINK_ANSWER.slice(0, 6) }])] }),
        sse({ candidates: [cand([{ text: THINK_ANSWER.slice(6), thoughtSignature: sig }], 'STOP')], usageMetadata }),
      ],
    };
  }
  const sig = `TS-call-${ledger.next()}-${crypto.randomBytes(6).toString('hex')}`;
  ledger.thoughtSignatures.add(sig);
  return {
    kind: 'stream',
    frames: [
      sse({ candidates: [cand([{ text: THINKING_TEXT, thought: true }])] }),
      sse({
        candidates: [cand([{ functionCall: { name: tool.name, args: tool.args }, thoughtSignature: sig }], 'STOP')],
        usageMetadata,
      }),
    ],
  };
}

// ---- OpenAI Responses -----------------------------------------------------------------------------------------

type OpenAiItem = { type?: string; id?: string; role?: string; call_id?: string; encrypted_content?: string | null };
interface OpenAiBody {
  model: string;
  store?: boolean;
  include?: string[];
  input: OpenAiItem[];
}

const openAiError = (status: number, message: string, param: string | null = 'input'): ThinkOutcome => ({
  kind: 'error',
  status,
  body: { error: { message, type: 'invalid_request_error', param, code: null } },
});

export function openAiThink(ledger: ThinkingLedger, body: OpenAiBody, tool: ThinkTool = CALCULATOR_CALL): ThinkOutcome {
  const stored = body.store !== false;
  for (const item of body.input) {
    if (stored) continue;
    const notFound = (id: string) =>
      openAiError(
        404,
        `Item with id '${id}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`,
      );
    if (item.type === 'item_reference') return refuse(ledger, notFound(item.id ?? '?'));
    if (item.type === 'reasoning' && (!item.encrypted_content || ledger.encrypted.get(item.id ?? '') !== item.encrypted_content))
      return refuse(ledger, notFound(item.id ?? '?'));
  }
  const base = {
    id: 'resp_think',
    object: 'response',
    created_at: 1_760_000_000,
    model: body.model,
    output: [],
    usage: null,
    status: 'in_progress',
  };
  const usage = {
    input_tokens: USAGE.prompt,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: USAGE.completion,
    output_tokens_details: { reasoning_tokens: 4 },
    total_tokens: USAGE.prompt + USAGE.completion,
  };
  const out: string[] = [sse({ type: 'response.created', response: base, sequence_number: 0 })];
  const output = body.input.at(-1);
  if (output?.type === 'function_call_output') {
    // The function_call this output answers must follow the reasoning item it came after.
    const ci = body.input.findIndex((i) => i.type === 'function_call' && i.call_id === output.call_id);
    const before = body.input[ci - 1];
    const rsId = [...ledger.encrypted.keys()].at(-1) ?? 'rs_?';
    if (ci < 0 || !(before?.type === 'reasoning' || (before?.type === 'item_reference' && stored)))
      return refuse(
        ledger,
        openAiError(400, `Item 'fc_think' of type 'function_call' was provided without its required 'reasoning' item: '${rsId}'.`),
      );
    const item = { type: 'message', id: 'msg_think', role: 'assistant', status: 'in_progress', content: [] };
    out.push(sse({ type: 'response.output_item.added', output_index: 0, item }));
    out.push(
      sse({
        type: 'response.output_text.delta',
        item_id: 'msg_think',
        output_index: 0,
        content_index: 0,
        delta: THINK_ANSWER,
        logprobs: [],
      }),
    );
    const done = { ...item, status: 'completed', content: [{ type: 'output_text', text: THINK_ANSWER, annotations: [] }] };
    out.push(sse({ type: 'response.output_item.done', output_index: 0, item: done }));
    out.push(sse({ type: 'response.completed', response: { ...base, status: 'completed', output: [done], usage } }));
    return { kind: 'stream', frames: out };
  }
  const n = ledger.next();
  const rs = `rs_think_${n}`;
  // Encrypted content comes only when asked for (include reasoning.encrypted_content, what store:false needs).
  const enc = body.include?.includes('reasoning.encrypted_content') ? `gAAAAB-enc-${n}-${crypto.randomBytes(8).toString('hex')}` : null;
  if (enc) ledger.encrypted.set(rs, enc);
  out.push(
    sse({ type: 'response.output_item.added', output_index: 0, item: { type: 'reasoning', id: rs, summary: [], encrypted_content: null } }),
  );
  out.push(
    sse({
      type: 'response.reasoning_summary_part.added',
      item_id: rs,
      output_index: 0,
      summary_index: 0,
      part: { type: 'summary_text', text: '' },
    }),
  );
  out.push(sse({ type: 'response.reasoning_summary_text.delta', item_id: rs, output_index: 0, summary_index: 0, delta: THINKING_TEXT }));
  out.push(
    sse({
      type: 'response.reasoning_summary_part.done',
      item_id: rs,
      output_index: 0,
      summary_index: 0,
      part: { type: 'summary_text', text: THINKING_TEXT },
    }),
  );
  const reasoning = { type: 'reasoning', id: rs, summary: [{ type: 'summary_text', text: THINKING_TEXT }], encrypted_content: enc };
  out.push(sse({ type: 'response.output_item.done', output_index: 0, item: reasoning }));
  const call = { type: 'function_call', id: 'fc_think', call_id: `call_think_${n}`, name: tool.name, arguments: '', status: 'in_progress' };
  out.push(sse({ type: 'response.output_item.added', output_index: 1, item: call }));
  out.push(sse({ type: 'response.function_call_arguments.delta', item_id: 'fc_think', output_index: 1, delta: JSON.stringify(tool.args) }));
  const callDone = { ...call, arguments: JSON.stringify(tool.args), status: 'completed' };
  out.push(sse({ type: 'response.output_item.done', output_index: 1, item: callDone }));
  out.push(sse({ type: 'response.completed', response: { ...base, status: 'completed', output: [reasoning, callDone], usage } }));
  return { kind: 'stream', frames: out };
}

function refuse(ledger: ThinkingLedger, outcome: ThinkOutcome): ThinkOutcome {
  if (outcome.kind === 'error') ledger.refusals.push(JSON.stringify(outcome.body));
  return outcome;
}
