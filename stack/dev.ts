/**
 * `npm start`: the whole system on embedded defaults — embedded PostgreSQL, the Temporal dev server with
 * its Web UI, a worker, the agent backend, the api and the demo model — with its state under DATA_DIR,
 * so Ctrl-C stops everything and the next `npm start` finds its conversations (and waiting turns) again.
 *
 * Two processes (the supervisor of stack/service-process.ts, shared with `npm run cluster`): the one npm starts
 * runs the stack in a child in its own process group and passes signals on to it, so only the stack's ordered
 * shutdown stops PostgreSQL and the Temporal dev server: turns in flight drain (SHUTDOWN_DRAIN_MS), then worker,
 * backend, api, Temporal, PostgreSQL.
 */
import { sandboxAvailableHere } from '../agent-backend/workspace/sandbox.js';
import { loadConfigWithLocalSecrets } from '../core/platform/local-secrets.js';
import { createLogger } from '../core/platform/logger.js';
import { installProcessGuard } from '../core/platform/process-guard.js';
import { startStack, type Stack } from './start-stack.js';
import { pageLinks } from './links.js';
import { forcedExitAfter, onStopSignals, superviseInOwnGroup } from './service-process.js';

const STACK_CHILD = 'DIFY_AGENT_STACK_CHILD';

if (process.env[STACK_CHILD] !== '1') await superviseInOwnGroup(import.meta.url, STACK_CHILD);
else await runStack();

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
    const stopped = forcedExitAfter(config.SHUTDOWN_DRAIN_MS + 40_000);
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
    stopped();
    console.log('stopped.');
    process.exit(0);
  };
  onStopSignals((why) => void shutdown(why));

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
