/**
 * The escape suite's fixture (issue 27): one real stack per test file (test/support/stack.ts) with a published agent
 * whose runtime and shell are on; every probe is a real turn (POST /v1/chat-messages → Temporal → agent backend →
 * demo model → `shell` tool → shellctl → the binding's workspace). Probes are sent as `/tool shell {"command": ...}`
 * so a multi-line python3 script stays one JSON string. A probe prints `ESCAPED <what>` only when the forbidden
 * thing worked and `REFUSED <what> <ERRNO> <message>` when it failed; tests assert both the marker's absence and
 * the expected refusal, so a probe that did not run at all fails the test too.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { expect } from 'vitest';
import type { Env } from '../../../core/platform/config.js';
import { AgentSoulConfig, demoSoulConfig } from '../../../core/domain/soul.js';
import type { Stack } from '../../../stack/start-stack.js';
import { chat, type ClientFrame } from '../../support/sse.js';
import { startTestStack } from '../../support/stack.js';

export const PYTHON = '/usr/bin/python3';
export const SHELLCTL_TOKEN = 'test-sandbox-shellctl-token';

export interface SandboxStack {
  stack: Stack;
  key: string;
  /** One turn; `command` runs in the shell of `user`'s conversation (a new one without `conversationId`). */
  sh: (command: string, user: string, opts?: { conversationId?: string; timeoutMs?: number; files?: unknown[] }) => Promise<Turn>;
  workspaceOf: (conversationId: string) => Promise<{ workspaceId: string; dir: string }>;
}

export interface Turn {
  frames: ClientFrame[];
  answer: string;
  conversationId: string;
  messageId: string;
  end: ClientFrame;
}

/**
 * Non-default backend token, inner key and context signing key (runtime and the workspace authorization are refused
 * while one holds its public default),
 * small output so answers stay short; `env` adds the file's own settings (limits for the bomb tests).
 */
export async function startSandboxStack(name: string, env: Partial<Env> = {}): Promise<SandboxStack> {
  const stack = await startTestStack(name, {
    env: {
      SHELLCTL_AUTH_TOKEN: SHELLCTL_TOKEN,
      AGENT_BACKEND_TOKEN: `backend-${crypto.randomBytes(12).toString('hex')}`,
      INNER_API_KEY: `inner-${crypto.randomBytes(12).toString('hex')}`,
      EXECUTION_CONTEXT_SIGNING_KEY: `context-${crypto.randomBytes(12).toString('hex')}`,
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      SHELL_MAX_OUTPUT_BYTES: 8192,
      ...env,
      // Checking that the suite can fail: e.g. SANDBOX_SUITE_ENV='{"SHELL_ISOLATION":"off"}' must turn it red.
      ...(process.env.SANDBOX_SUITE_ENV ? (JSON.parse(process.env.SANDBOX_SUITE_ENV) as Partial<Env>) : {}),
    },
  });
  const key = stack.demo!.apiKey;
  const consoleFetch = (p: string, method: string, body: unknown) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true, timeout_ms: 30_000 };
  const draft = await consoleFetch('/agent/draft', 'PUT', { config: AgentSoulConfig.parse(soul) });
  expect(draft.status, await draft.clone().text()).toBe(200);
  expect((await consoleFetch('/agent/publish', 'POST', { from: 'draft' })).status).toBe(201);

  const sh: SandboxStack['sh'] = async (command, user, opts = {}) => {
    const args = { command, ...(opts.timeoutMs ? { timeout_ms: opts.timeoutMs } : {}) };
    const { status, frames } = await chat(stack.apiUrl, key, {
      query: `/tool shell ${JSON.stringify(args)}`,
      user,
      ...(opts.conversationId ? { conversation_id: opts.conversationId } : {}),
      ...(opts.files ? { files: opts.files } : {}),
    });
    expect(status, JSON.stringify(frames[0]?.data)).toBe(200);
    const end = frames.at(-1)!;
    return {
      frames,
      answer: (frames.find((f) => f.event === 'message')?.data.answer as string | undefined) ?? '',
      conversationId: end.data.conversation_id as string,
      messageId: end.data.message_id as string,
      end,
    };
  };

  const workspaceOf = async (conversationId: string) => {
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const binding = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
    return { workspaceId: binding.workspace_id, dir: path.join(stack.config.workspacesDir, binding.workspace_id) };
  };
  return { stack, key, sh, workspaceOf };
}

/**
 * A python3 probe as one shell command (a pipeline, so it composes with `;`): `probe(what, fn)` prints ESCAPED when `fn` returns, REFUSED with the errno
 * name when it raises OSError. `body` is python (one statement per line, using probe()).
 */
/** A file's probes as turns of one conversation (one workspace): each must end with message_end. */
export function oneConversation(stack: () => SandboxStack, user: string): (command: string) => Promise<Turn> {
  let conversationId: string | undefined;
  return async (command) => {
    const t = await stack().sh(command, user, { conversationId });
    conversationId = t.conversationId;
    expect(t.end.event, JSON.stringify(t.end.data)).toBe('message_end');
    return t;
  };
}

export function pythonProbe(body: string): string {
  return pythonScript(
    [
      'import errno, os, socket, sys',
      'def probe(what, fn):',
      '    try:',
      '        r = fn()',
      '        print("ESCAPED", what, r, flush=True)',
      '    except OSError as e:',
      '        print("REFUSED", what, errno.errorcode.get(e.errno, e.errno), e.strerror, flush=True)',
      body,
    ].join('\n'),
  );
}

/** Any python3 script as one shell command. */
export function pythonScript(script: string): string {
  // base64 keeps it one shell word: composable with `;` and free of quoting (a heredoc must end its line).
  return `echo ${Buffer.from(script).toString('base64')} | base64 -d | ${PYTHON} -`;
}

/** The REFUSED line of one probe (fails the test when the probe did not report at all). */
export function refusalOf(answer: string, what: string): { errno: string; line: string } {
  expect(answer, `the answer names no result for ${what}`).toMatch(new RegExp(`(REFUSED|ESCAPED) ${escapeRe(what)} `));
  expect(answer).not.toMatch(new RegExp(`ESCAPED ${escapeRe(what)} `));
  const line = new RegExp(`REFUSED ${escapeRe(what)} (\\S+)[^\\n]*`).exec(answer)!;
  return { errno: line[1]!, line: line[0] };
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
