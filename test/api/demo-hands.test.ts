/**
 * Issue 27 item 8: npm start's demo agent gets runtime and shell. One seeded before that (and never edited since) is
 * given them by a new published version; one a user edited is left alone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../core/platform/db.js';
import { enableDemoHands, ensureDemoData } from '../../core/domain/seed.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { freshDatabase } from '../support/db.js';

let db: Db;
beforeAll(async () => {
  db = createDb(await freshDatabase('demo_hands'));
});
afterAll(async () => db?.$disconnect());

const hands = () => {
  const s = demoSoulConfig();
  s.runtime = { enabled: true };
  s.shell = { ...s.shell, enabled: true };
  return s;
};

async function activeSoul(agentId: string) {
  const agent = await db.agent.findUniqueOrThrow({ where: { id: agentId } });
  const v = await db.agentConfigVersion.findUniqueOrThrow({ where: { id: agent.active_config_snapshot_id! } });
  return AgentSoulConfig.parse(v.config_snapshot);
}

describe('the demo agent of an earlier start', () => {
  it('untouched: runtime and shell are published (once); the draft follows', async () => {
    const demo = await ensureDemoData(db, { dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'demo-hands-')), soul: demoSoulConfig() });
    expect((await activeSoul(demo.agentId)).runtime.enabled).toBe(false);
    expect(await enableDemoHands(db, demo, { untouched: demoSoulConfig(), withHands: hands() })).toBe(true);
    const soul = await activeSoul(demo.agentId);
    expect(soul.runtime.enabled).toBe(true);
    expect(soul.shell.enabled).toBe(true);
    const draft = await db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: demo.agentId, draft_type: 'DRAFT' } });
    expect(AgentSoulConfig.parse(draft.config).shell.enabled).toBe(true);
    expect(await enableDemoHands(db, demo, { untouched: demoSoulConfig(), withHands: hands() })).toBe(false);
    expect(await db.agentConfigVersion.count({ where: { agent_id: demo.agentId } })).toBe(2);
  });

  it('edited by a user: left as it is', async () => {
    await db.$disconnect();
    db = createDb(await freshDatabase('demo_hands_edited')); // a demo tenant of its own
    const demo = await ensureDemoData(db, { dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'demo-hands-')), soul: demoSoulConfig() });
    const draft = await db.agentConfigDraft.findFirstOrThrow({ where: { agent_id: demo.agentId, draft_type: 'DRAFT' } });
    const edited = { ...demoSoulConfig(), prompt: { ...demoSoulConfig().prompt, system_prompt: 'Mine.' } };
    await db.agentConfigDraft.update({ where: { id: draft.id }, data: { config: edited as object } });
    expect(await enableDemoHands(db, demo, { untouched: demoSoulConfig(), withHands: hands() })).toBe(false);
    expect((await activeSoul(demo.agentId)).runtime.enabled).toBe(false);
  });
});
