/**
 * POST /inner/api/knowledge/retrieve (docs/PROTOCOL.md §3, docs/knowledge.md): the agent backend's `knowledge`
 * module retrieves chunks for a run. Scope comes only from the signed execution context in the body: its tenant's
 * datasets, and only those the turn's own run request names in its `knowledge` layer. Every retrieval served is
 * recorded in the message's metadata (`retriever_resources`, with the chunk's text), which is how a message keeps the
 * chunks it used; with the app's `retriever_resource` feature on, they are the answer's citations
 * (core/domain/knowledge/citations.ts).
 */
import express, { type Router } from 'express';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Embedder } from '../../core/domain/knowledge/embed.js';
import { KnowledgeError } from '../../core/domain/knowledge/errors.js';
import { retrieveChunks } from '../../core/domain/knowledge/retrieve.js';
import { RetrieveRequest, type RetrievedChunk, type RetrieveResponse } from '../../core/protocol/knowledge.js';
import type { CreateRunRequest } from '../../core/protocol/run.js';
import { HttpError, parseOr400 } from '../errors.js';
import { verifyForwardedContext } from './execution-context.js';
import { requireInnerApiKey } from './auth.js';
import { AGENT_RUN_ID_HEADER } from './agent-config.js';

export interface InnerKnowledgeDeps {
  db: Db;
  embed: Embedder;
  innerApiKey: string;
  signingKey: string;
  maxJsonDepth?: number;
}

export function innerKnowledgeRoutes(deps: InnerKnowledgeDeps): Router {
  const { db } = deps;
  const r = express.Router();
  r.use(requireInnerApiKey(deps.innerApiKey));
  r.use(jsonBody({ limit: '1mb', maxDepth: deps.maxJsonDepth, rejectNul: true }));

  r.post('/retrieve', async (req, res) => {
    const body = parseOr400(RetrieveRequest, req.body);
    const ctx = body.execution_context;
    const { messageId } = await verifyForwardedContext(db, deps.signingKey, ctx, req.header(AGENT_RUN_ID_HEADER));
    const allowed = await configuredDatasets(db, messageId);
    const refused = body.dataset_ids.find((id) => !allowed.has(id));
    if (refused) throw new HttpError(403, 'dataset_not_allowed', `Dataset ${refused} is not in this run's knowledge configuration.`);
    let chunks: RetrievedChunk[];
    try {
      chunks = await retrieveChunks(
        { db, embed: deps.embed },
        {
          tenantId: ctx.tenant_id,
          datasetIds: body.dataset_ids,
          query: body.query,
          topK: body.top_k,
          scoreThreshold: body.score_threshold,
        },
      );
    } catch (err) {
      if (err instanceof KnowledgeError) throw new HttpError(err.status, err.code, err.message);
      throw err;
    }
    await recordRetrieval(db, messageId, body.source, chunks);
    res.json({ chunks } satisfies RetrieveResponse);
  });

  return r;
}

/** The dataset ids of the `knowledge` layer of the run request the api built for this message. */
async function configuredDatasets(db: Db, messageId: string): Promise<Set<string>> {
  const run = await db.agentBackendRun.findUnique({ where: { message_id: messageId }, select: { request: true } });
  const layers = (run?.request as CreateRunRequest | null)?.composition?.layers ?? [];
  const ids = layers.find((l) => l.type === 'knowledge')?.config?.dataset_ids;
  return new Set(Array.isArray(ids) ? ids.filter((x): x is string => typeof x === 'string') : []);
}

/**
 * Appends what was retrieved to messages.metadata.retriever_resources (Dify's field names), once per
 * (segment, source): a replayed request adds nothing. One statement, so it cannot lose a concurrent append.
 */
async function recordRetrieval(db: Db, messageId: string, source: string, chunks: RetrievedChunk[]): Promise<void> {
  if (chunks.length === 0) return;
  const entries = chunks.map((c, i) => ({
    position: i + 1,
    dataset_id: c.dataset_id,
    dataset_name: c.dataset_name,
    document_id: c.document_id,
    document_name: c.document_name,
    segment_id: c.chunk_id,
    score: c.score,
    source,
    // The citation's text as the model got it (the chunk may be edited or deleted later).
    content: c.content,
  }));
  await db.$executeRaw`
    update messages m
       set metadata = jsonb_set(coalesce(m.metadata, '{}'::jsonb), '{retriever_resources}',
             coalesce(m.metadata -> 'retriever_resources', '[]'::jsonb) || coalesce((
               select jsonb_agg(e) from jsonb_array_elements(${JSON.stringify(entries)}::jsonb) e
                where not coalesce(m.metadata -> 'retriever_resources', '[]'::jsonb)
                          @> jsonb_build_array(jsonb_build_object('segment_id', e -> 'segment_id', 'source', e -> 'source'))
             ), '[]'::jsonb))
     where m.id = ${messageId}::uuid`;
}
