/**
 * The studio's app list (issue 42): copy an agent app and delete one, under /console/api with console-key auth.
 * Another tenant's app reads as missing (404 app_not_found), as everywhere in the console.
 *
 * - **Copy** (`POST /apps/{app_id}/copy`, Dify's route name): a new app with the source's shared draft config (checked as
 *   a save is), published as its version 1 with a shared draft from it, and the source's icon, description and
 *   multitask default. Not copied: conversations and messages, versions, build drafts, annotations, API keys,
 *   schedules, webhooks, workspaces.
 * - **Delete** (`DELETE /apps/{app_id}`): refused with 409 app_busy while a turn of the app is queued, running or
 *   waiting for a human (stop them first: a workflow must not finish into rows that are gone). Otherwise its Temporal
 *   schedules are deleted, then in one transaction its human-input forms, its conversations (with their messages,
 *   thoughts, events, …) and the app (with its agent, versions, drafts, workspaces, keys, end users, annotations,
 *   schedules and webhooks) and its uploads' rows (upload_files.app_id is no foreign key); the uploads' stored files
 *   are removed after the commit.
 *   Its API keys stop working at once: the delete's trigger NOTIFYs every replica (api/credential-watch.ts). The
 *   credit ledger keeps its rows (what was billed stays billed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ScheduleNotFoundError, type Client } from '@temporalio/client';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { findSharedDraft } from '../../core/domain/agent-configs.js';
import { uploadsDir } from '../../core/domain/uploads.js';
import { createUniqueAgentApp } from '../../core/domain/provision.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { devDefaultSecrets, type Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { scheduleIdForRow } from '../../workflows/automation-definitions.js';
import { evictAppKey } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { validatedSoul } from './agent-config-validation.js';
import { createdAppView } from './admin.js';
import { consoleApp, consoleAuth } from './auth.js';

export const CopyAppBody = z
  .object({
    name: z.string().trim().min(1).max(100).optional().describe('Default: the source’s name with " (copy)" (" (copy 2)", … when taken).'),
    icon: z.string().trim().min(1).max(16).optional().describe('Default: the source’s.'),
    description: z.string().trim().max(400).optional().describe('Default: the source’s.'),
  })
  .strict();

/** The turns that block a delete: a workflow (or the queue) still owns them. */
const IN_FLIGHT = ['queued', 'pending', 'running', 'paused'] as const;
/** How many " (copy n)" names a copy without a name tries before it asks for one. */
const COPY_NAME_TRIES = 20;

/** Removes the uploads' stored files (a missing one is fine: the removal is idempotent); the keys that failed. */
async function removeStoredUploads(config: Config, storageKeys: string[]): Promise<string[]> {
  const root = uploadsDir(config);
  const failed: string[] = [];
  for (const key of storageKeys) {
    const target = path.resolve(root, key);
    if (!target.startsWith(root + path.sep)) continue; // never outside the uploads directory
    await fs.promises.rm(target, { force: true }).catch(() => failed.push(key));
  }
  return failed;
}

export interface ConsoleAppDeps {
  db: Db;
  temporal: Client;
  config: Config;
  logger: Logger;
  backend: Pick<AgentBackendClient, 'validateComposition'>;
}

export function consoleAppRoutes(deps: ConsoleAppDeps): Router {
  const { db, temporal, logger } = deps;
  const soulDeps = {
    db,
    backend: deps.backend,
    logger,
    signingKeyIsDefault: devDefaultSecrets(deps.config).includes('EXECUTION_CONTEXT_SIGNING_KEY'),
  };
  const r = Router();
  const auth = consoleAuth(db);
  const body: RequestHandler[] = jsonBody({ limit: '16kb', maxDepth: deps.config.JSON_MAX_DEPTH, rejectNul: true });

  r.post('/apps/:app_id/copy', auth, ...body, async (req: Request, res: Response) => {
    const { app, agent, ctx } = await consoleApp(db, req);
    const b = parseOr400(CopyAppBody, req.body ?? {});
    const draft = await findSharedDraft(db, agent.id);
    if (!draft) throw new HttpError(404, 'agent_draft_not_found', 'The agent has no draft to copy.');
    const config = await validatedSoul(soulDeps, { tenantId: ctx.tenantId, soul: draft.config });
    const names = b.name
      ? [b.name]
      : Array.from({ length: COPY_NAME_TRIES }, (_, i) => `${app.name.slice(0, 90)} (copy${i ? ` ${i + 1}` : ''})`);
    let ids = null;
    let name = '';
    for (name of names) {
      ids = await createUniqueAgentApp(
        db,
        {
          tenantId: ctx.tenantId,
          name,
          description: b.description ?? app.description,
          icon: b.icon ?? app.icon,
          createdBy: ctx.accountId,
        },
        config,
      );
      if (ids) break;
    }
    if (!ids)
      throw new HttpError(
        409,
        'app_name_taken',
        b.name ? `This workspace already has an app named "${b.name}".` : `Every name up to "${name}" is taken: give the copy a name.`,
      );
    const copy = await db.app.update({ where: { id: ids.appId }, data: { multitask_strategy: app.multitask_strategy } });
    logger.info({ app_id: app.id, copy_app_id: copy.id }, 'app copied');
    res.status(201).json(createdAppView(copy, ids, config));
  });

  r.delete('/apps/:app_id', auth, async (req, res) => {
    const { app } = await consoleApp(db, req);
    const busy = await db.message.findMany({
      where: { app_id: app.id, status: { in: [...IN_FLIGHT] } },
      select: { id: true },
      take: 20,
    });
    if (busy.length)
      throw new HttpError(
        409,
        'app_busy',
        `${busy.length === 20 ? '20 or more turns' : `${busy.length} turn${busy.length === 1 ? '' : 's'}`} of this app ` +
          'are running, queued or waiting for a human: stop them first, then delete the app.',
        { task_ids: busy.map((m) => m.id) },
      );
    const schedules = await db.appSchedule.findMany({ where: { app_id: app.id }, select: { id: true } });
    for (const s of schedules) {
      try {
        await temporal.schedule.getHandle(scheduleIdForRow(s.id)).delete();
      } catch (err) {
        if (err instanceof ScheduleNotFoundError) continue;
        logger.warn({ err: (err as Error).message, app_id: app.id }, 'app delete: a schedule could not be deleted');
        throw new HttpError(503, 'service_unavailable', 'The app’s schedules could not be deleted; try again shortly.');
      }
    }
    const keys = await db.apiToken.findMany({ where: { app_id: app.id }, select: { token_hash: true } });
    const [, , files] = await db.$transaction([
      db.humanInputForm.deleteMany({ where: { app_id: app.id } }),
      db.conversation.deleteMany({ where: { app_id: app.id } }),
      // Its uploads (end users', the debugger's, the agent's outputs): app_id is no foreign key, so nothing cascades.
      // RETURNING names exactly the rows this delete removed, an upload committed meanwhile included.
      db.$queryRaw<{ storage_key: string }[]>`DELETE FROM upload_files WHERE app_id = ${app.id}::uuid RETURNING storage_key`,
      db.app.delete({ where: { id: app.id } }),
    ]);
    for (const k of keys) evictAppKey(k.token_hash);
    // The stored bytes after the commit (a file without its row is unreachable: no link is signed for it); a file
    // that cannot be removed is logged, the delete stands.
    const failed = await removeStoredUploads(
      deps.config,
      files.map((f) => f.storage_key),
    );
    if (failed.length) logger.warn({ app_id: app.id, files: failed.length, first: failed[0] }, 'app delete: stored uploads left behind');
    logger.info({ app_id: app.id, schedules: schedules.length, files: files.length }, 'app deleted');
    res.status(204).end();
  });

  return r;
}
