/**
 * The bench's peer (issue 33): what a user would build instead of us — a LangGraph.js turn served by Express over SSE.
 * A StateGraph of a model node and a tool node (the calculator), compiled with the PostgreSQL checkpointer of
 * @langchain/langgraph-checkpoint-postgres on the bench's embedded PostgreSQL (its own schema), streamed with
 * `durability: 'sync'` (every superstep's checkpoint committed before the next step runs). The model is the stack's
 * demo model (core/domain/llm/providers/demo.ts) called in this process: the same plan, the same pieces, the same per-token
 * delay (`/slow`) as the durable and direct paths get through the gateway.
 *
 * Run by bench/peer.ts as its own process (so its CPU is counted apart): `node --import tsx bench/peer-server.ts`
 * with PEER_DATABASE_URL and PEER_TOKEN_DELAY_MS; it prints `PEER_READY <port>` once it listens.
 *
 * `POST /runs/stream` `{thread_id, query}` → SSE: `event: token` `{text}` per answer piece, then `event: end`
 * `{messages}` (or `event: error`).
 */
import express from 'express';
import { BaseChatModel, type BaseChatModelCallOptions } from '@langchain/core/language_models/chat_models';
import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import { AIMessage, AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { z } from 'zod';
import type { PromptMessage, ToolDefinition } from '../core/protocol/inner-llm.js';
import { createDemoProvider } from '../core/domain/llm/providers/demo.js';

const CALCULATOR: ToolDefinition = {
  name: 'calculator',
  description: 'Evaluates an arithmetic expression.',
  parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
};

/** The demo model as a LangChain chat model: LangGraph's `messages` stream mode picks up its streamed chunks. */
class DemoChatModel extends BaseChatModel<BaseChatModelCallOptions> {
  private readonly provider;

  constructor(tokenDelayMs: number) {
    super({});
    this.provider = createDemoProvider({ tokenDelayMs });
  }

  _llmType(): string {
    return 'bench-demo';
  }

  async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this['ParsedCallOptions'],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const events = this.provider.invoke({
      provider: 'demo',
      model: 'demo-chat',
      prompt_messages: messages.map(toPrompt),
      tools: [CALCULATOR],
      model_parameters: {},
      credentials: null,
      signal: options.signal ?? new AbortController().signal,
    } as Parameters<typeof this.provider.invoke>[0]);
    for await (const ev of events) {
      if (ev.type !== 'delta') continue;
      if (ev.content) {
        yield new ChatGenerationChunk({ text: ev.content, message: new AIMessageChunk({ content: ev.content }) });
        await runManager?.handleLLMNewToken(ev.content);
      }
      for (const [index, c] of (ev.tool_calls ?? []).entries()) {
        const message = new AIMessageChunk({
          content: '',
          tool_call_chunks: [{ name: c.function.name, args: c.function.arguments, id: c.id, index, type: 'tool_call_chunk' }],
        });
        yield new ChatGenerationChunk({ text: '', message });
      }
    }
  }

  async _generate(messages: BaseMessage[], options: this['ParsedCallOptions'], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    let all: ChatGenerationChunk | undefined;
    for await (const chunk of this._streamResponseChunks(messages, options, runManager)) all = all ? all.concat(chunk) : chunk;
    return { generations: all ? [all] : [] };
  }
}

function toPrompt(m: BaseMessage): PromptMessage {
  const text = typeof m.content === 'string' ? m.content : JSON.stringify(m.content);
  if (m instanceof ToolMessage) return { role: 'tool', content: text, tool_call_id: m.tool_call_id };
  if (m instanceof AIMessage)
    return {
      role: 'assistant',
      content: text,
      ...(m.tool_calls?.length
        ? {
            tool_calls: m.tool_calls.map((c) => ({
              id: c.id ?? '',
              type: 'function' as const,
              function: { name: c.name, arguments: JSON.stringify(c.args) },
            })),
          }
        : {}),
    };
  return { role: 'user', content: text };
}

/** Digits, operators and parentheses only: the bench's `/calc 6*7`. */
const calculator = tool(
  ({ expression }: { expression: string }) => {
    if (!/^[\d\s+\-*/().]+$/.test(expression)) return 'error: not an arithmetic expression';
    return String(Function(`"use strict"; return (${expression});`)());
  },
  { name: 'calculator', description: CALCULATOR.description, schema: z.object({ expression: z.string() }) },
);

async function main(): Promise<void> {
  const url = process.env.PEER_DATABASE_URL;
  if (!url) throw new Error('PEER_DATABASE_URL is required');
  const model = new DemoChatModel(Number(process.env.PEER_TOKEN_DELAY_MS ?? 5));
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  const checkpointer = new PostgresSaver(pool, undefined, { schema: 'bench_peer' });
  await pool.query('CREATE SCHEMA IF NOT EXISTS bench_peer');
  await checkpointer.setup();
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', new ToolNode([calculator]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer });

  const app = express();
  app.use(express.json());
  const Body = z.object({ thread_id: z.string().min(1), query: z.string() });
  app.post('/runs/stream', async (req, res) => {
    const body = Body.safeParse(req.body);
    if (!body.success) return void res.status(400).json({ code: 'invalid_request', message: body.error.message });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    try {
      const stream = await graph.stream(
        { messages: [new HumanMessage(body.data.query)] },
        { configurable: { thread_id: body.data.thread_id }, streamMode: 'messages', durability: 'sync', signal: abort.signal },
      );
      let n = 0;
      for await (const [chunk, meta] of stream) {
        if ((meta as { langgraph_node?: string }).langgraph_node !== 'agent') continue;
        const text = typeof chunk.content === 'string' ? chunk.content : '';
        if (text) send('token', { text });
        n += 1;
      }
      send('end', { chunks: n });
    } catch (err) {
      send('error', { message: (err as Error).message });
    }
    res.end();
  });
  const server = app.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    console.log(`PEER_READY ${typeof addr === 'object' && addr ? addr.port : 0}`);
  });
  const stop = () => server.close(() => void pool.end().finally(() => process.exit(0)));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

await main();
