/**
 * A worker SIGKILLed while the agent's shell command runs (issue 13): the command is neither interrupted
 * nor repeated — it runs in the agent backend, and the restarted worker reattaches to the same backend
 * run (one run per message) and finishes the turn with the command's observation.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { killWorkerChild } from '../support/processes.js';
import { backendRunsOf } from '../support/sql.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('workspace_durability', {
    worker: 'child',
    env: { SHELLCTL_AUTH_TOKEN: 'test-shellctl-token', DEMO_MODEL_TOKEN_DELAY_MS: 0 },
  });
  key = stack.demo!.apiKey;
  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true };
  const consoleFetch = (p: string, method: string, body: unknown) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await consoleFetch('/agent/draft', 'PUT', { config: AgentSoulConfig.parse(soul) })).status).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);
}, 300_000);
afterAll(async () => stack?.stop());

describe('a worker killed during a shell command', () => {
  it('neither interrupts nor repeats the command: the turn reattaches to the same backend run', async () => {
    const first = await chat(stack.apiUrl, key, { query: '/sh true', user: 'durable' });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    const log = path.join(stack.config.workspacesDir, binding.workspace_id, 'runs.txt');

    const res = await postChat(stack.apiUrl, key, {
      query: '/sh echo started >> runs.txt; sleep 2; echo finished >> runs.txt; cat runs.txt',
      user: 'durable',
      conversation_id: conversationId,
    });
    const reader = new FrameReader(res);
    for (let i = 0; i < 1000 && !(fs.existsSync(log) && fs.readFileSync(log, 'utf8').includes('started')); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(fs.readFileSync(log, 'utf8')).toBe('started\n');
    await killWorkerChild(stack);
    await stack.startWorkerChild();

    const frames = await reader.read();
    expect(frames.at(-1)!.event).toBe('message_end');
    const answer = frames.find((f) => f.event === 'message')!.data.answer as string;
    expect(answer).toContain('The command exited with code 0.');
    expect(answer).toContain('started\nfinished');
    // Exactly once: one line of each, one backend run for the message.
    expect(fs.readFileSync(log, 'utf8')).toBe('started\nfinished\n');
    const messageId = frames.at(-1)!.data.message_id as string;
    expect(await backendRunsOf(stack.databaseUrl, messageId)).toBe(1);
  });
});
