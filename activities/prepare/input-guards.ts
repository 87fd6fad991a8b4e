/**
 * inputGuards (docs/seeds/000, skipped on resume): keyword moderation over the inputs and the query (answered
 * with the preset answer) and annotation reply (the app's most similar annotated question, by pg_trgm,
 * at or above the app's threshold). A hit answers the turn without calling the agent backend.
 */
import { appendEvents } from '../../core/protocol/event-log.js';
import { emptyUsage } from '../../core/protocol/run.js';
import type { AgentSoulConfig } from '../../core/domain/soul.js';
import type { ActivityDeps } from '../deps.js';
import { finalAnswerEvents } from '../final-events.js';
import { releaseTurnLock } from '../../core/domain/turn/turn-lock.js';
import type { TurnContext } from './turn-context.js';

export function keywordHit(keywords: string[], texts: string[]): string | null {
  const hay = texts.map((t) => t.toLowerCase());
  for (const k of keywords) {
    const kw = k.trim().toLowerCase();
    if (kw && hay.some((h) => h.includes(kw))) return k;
  }
  return null;
}

export function inputTexts(query: string, inputs: unknown): string[] {
  const values = inputs && typeof inputs === 'object' ? Object.values(inputs as Record<string, unknown>) : [];
  return [query, ...values.filter((v): v is string => typeof v === 'string')];
}

export function createInputGuards(deps: ActivityDeps) {
  const { db } = deps;
  return async function inputGuards(
    ctx: TurnContext,
    soul: AgentSoulConfig,
    configVersionId: string | null,
  ): Promise<{ hit: null | 'moderation' | 'annotation' }> {
    const { msg, app } = ctx;
    if (msg.status !== 'pending' && msg.status !== 'running') {
      // Already answered by an earlier attempt.
      return { hit: (msg.metadata as { guard?: 'moderation' | 'annotation' })?.guard ?? null };
    }
    const mod = soul.features.moderation;
    let answer: string | null = null;
    let guard: 'moderation' | 'annotation' | null = null;
    let annotationReply: { id: string; question: string; score: number } | undefined;
    if (mod.enabled && keywordHit(mod.keywords, inputTexts(msg.query, msg.inputs))) {
      answer = mod.preset_answer;
      guard = 'moderation';
    } else if (app.annotation_reply_enabled) {
      const rows = await db.$queryRaw<{ id: string; question: string; content: string; score: number }[]>`
        select id::text, question, content, similarity(question, ${msg.query})::float8 as score
          from app_annotations
         where app_id = ${msg.app_id}::uuid and similarity(question, ${msg.query}) >= ${app.annotation_score_threshold}
         order by score desc limit 1`;
      const hit = rows[0];
      if (hit) {
        answer = hit.content;
        guard = 'annotation';
        annotationReply = { id: hit.id, question: hit.question, score: Number(hit.score.toFixed(4)) };
        await db.annotation.update({ where: { id: hit.id }, data: { hit_count: { increment: 1 } } });
      }
    }
    if (!guard || answer === null) return { hit: null };
    const metadata = annotationReply ? { guard, annotation_reply: annotationReply } : { guard };
    await db.$transaction(async (tx) => {
      await tx.message.update({
        where: { id: msg.id },
        data: { answer, status: 'succeeded', metadata, usage: emptyUsage(), agent_config_version_id: configVersionId },
      });
      await releaseTurnLock(tx, msg.conversation_id, msg.id);
      await appendEvents(tx, msg.id, finalAnswerEvents(msg, { answer, annotationReply }));
    });
    return { hit: guard };
  };
}
