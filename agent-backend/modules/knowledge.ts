/**
 * The `knowledge` module (docs/seeds/004, docs/knowledge.md): before the first model request it retrieves passages
 * for the user's query and appends them to the user message with source labels — never to the system prompt —
 * and, with `search_tool`, offers `knowledge_search` so the model can search again. Retrieval is the api's
 * (POST /inner/api/knowledge/retrieve), scoped by the run's signed execution context.
 */
import { z } from 'zod';
import { formatKnowledgeBlock, sourceLabel } from '../../core/protocol/context-block.js';
import type { RetrievedChunk } from '../../core/protocol/knowledge.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import { formatZodError } from '../errors.js';
import type { KnowledgeClient } from '../knowledge-client.js';
import { defineModule, type ToolOutcome, type UserMessageContext } from './types.js';
import { toolParameters } from './json-schema.js';

export const KnowledgeConfig = z
  .object({
    dataset_ids: z.array(z.uuid()).min(1).max(20),
    top_k: z.number().int().min(1).max(20).default(4),
    score_threshold: z.number().min(0).max(1).default(0),
    search_tool: z.boolean().default(true),
    execution_context: z.string().default('execution_context'),
    /** What to search for before the first request: the user's query as typed (the message may carry file notes). */
    query: z.string().max(100_000).optional(),
  })
  .strict();
type KnowledgeConfig = z.infer<typeof KnowledgeConfig>;

const SearchArgs = z
  .object({
    query: z.string().trim().min(1).max(4000).describe('What to look for in the knowledge base'),
    top_k: z.number().int().min(1).max(20).optional().describe('How many passages at most (default: the configured top_k)'),
  })
  .strict();

const NoState = z.object({}).strict() as z.ZodType<Record<string, never>>;

/** The longest query sent for eager retrieval (a pasted document makes a poor query anyway). */
const EAGER_QUERY_CHARS = 4000;

export function createKnowledgeModule(client?: KnowledgeClient) {
  return defineModule<KnowledgeConfig, Record<string, never>>({
    name: 'knowledge',
    capability: 'toolset',
    description: 'Knowledge base retrieval: passages for the user message (user role) and the knowledge_search tool.',
    configSchema: KnowledgeConfig,
    stateSchema: NoState,
    initialState: () => ({}),
    unavailable: client ? undefined : 'module knowledge is not available in this deployment (no api to retrieve from)',
    references: (c) => [{ field: 'execution_context', layer: c.execution_context, types: ['execution_context'] }],
    create: ({ name, config, state }) => {
      const retrieve = async (query: string, source: 'eager' | 'knowledge_search', ctx: UserMessageContext, topK = config.top_k) => {
        if (!client) throw new Error('module knowledge is not available in this deployment');
        if (!ctx.executionContext) throw new Error('knowledge retrieval needs the run’s execution context');
        return client.retrieve(
          {
            execution_context: ctx.executionContext,
            dataset_ids: [...config.dataset_ids],
            query,
            top_k: topK,
            score_threshold: config.score_threshold,
            source,
          },
          ctx.runId,
          ctx.signal,
        );
      };
      return {
        name,
        type: 'knowledge',
        state,
        capability: {
          kind: 'toolset',
          tools: () =>
            config.search_tool
              ? [
                  {
                    name: 'knowledge_search',
                    description:
                      'Search the knowledge base again (other words, a narrower question). Returns passages with their source ' +
                      'labels (dataset, document, chunk id) and a 0–1 relevance score.',
                    parameters: toolParameters(SearchArgs),
                  },
                ]
              : [],
          call: async (tool, args, ctx): Promise<ToolOutcome> => {
            if (tool !== 'knowledge_search') return { kind: 'result', result: `tool not available: ${tool}`, isError: true };
            const parsed = SearchArgs.safeParse(args);
            if (!parsed.success) return { kind: 'result', result: `Invalid arguments: ${formatZodError(parsed.error)}`, isError: true };
            const chunks = await retrieve(parsed.data.query, 'knowledge_search', ctx, parsed.data.top_k ?? config.top_k);
            return { kind: 'result', result: searchObservation(parsed.data.query, chunks) };
          },
          augmentUserMessage: async (message: PromptMessage, ctx: UserMessageContext) => {
            const query = (config.query ?? messageText(message)).trim().slice(0, EAGER_QUERY_CHARS);
            if (!query) return null;
            return formatKnowledgeBlock(await retrieve(query, 'eager', ctx));
          },
        },
      };
    },
  });
}

/** What the model (and the thought row) gets from knowledge_search: each passage with its source. */
export function searchObservation(query: string, chunks: RetrievedChunk[]) {
  return {
    query,
    results: chunks.map((c, i) => ({
      label: `[${i + 1}] ${sourceLabel(c)}`,
      chunk_id: c.chunk_id,
      dataset_id: c.dataset_id,
      document_id: c.document_id,
      document_name: c.document_name,
      score: c.score,
      content: c.content,
    })),
  };
}

function messageText(m: PromptMessage): string {
  if (typeof m.content === 'string') return m.content;
  return m.content.map((p) => (p.type === 'text' ? p.data : '')).join('\n');
}
