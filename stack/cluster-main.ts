/**
 * `npm run cluster`: the production topology on this machine (stack/cluster.ts), with its state under
 * DATA_DIR/cluster, so the next run finds its conversations and waiting turns again. Ctrl-C stops everything
 * in order: apis, workers (turns in flight finish or are picked up by the next run), backends, Temporal, PostgreSQL.
 *
 * Options: `--no-build` (run the existing dist/ instead of building it first), `--no-ui` (no Temporal UI).
 * DATABASE_URL runs it on an external PostgreSQL (Temporal's two databases are created on the same server).
 *
 * As with `npm start` (stack/dev.ts), two processes (the supervisor of stack/service-process.ts): the one npm
 * starts only passes signals on to the cluster, which runs in its own process group, so a terminal's Ctrl-C does
 * not reach PostgreSQL and the Temporal services directly (they would stop under the workers) but only through
 * the ordered shutdown.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/platform/config.js';
import { defaultPorts, startCluster, type Cluster } from './cluster.js';
import { forcedExitAfter, onStopSignals, superviseInOwnGroup } from './service-process.js';

const CHILD = 'DIFY_AGENT_CLUSTER_CHILD';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

if (process.env[CHILD] !== '1') await superviseInOwnGroup(import.meta.url, CHILD);
else await run();

async function run(): Promise<void> {
  const { values: flags } = parseArgs({ options: { 'no-build': { type: 'boolean' }, 'no-ui': { type: 'boolean' } } });
  const config = loadConfig();
  const dataDir = path.join(config.dataDir, 'cluster');
  const ports = defaultPorts();
  let cluster: Cluster | null = null;
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${why}: stopping the cluster ...`);
    const stopped = forcedExitAfter(90_000);
    await starting.catch(() => null);
    await cluster?.stop();
    stopped();
    console.log('stopped.');
    process.exit(0);
  };
  onStopSignals((why) => void shutdown(why));

  console.log(`Starting the cluster under ${dataDir} ...`);
  const starting = startCluster({
    dataDir,
    ports,
    databaseUrl: config.DATABASE_URL,
    buildDir: path.join(ROOT, 'dist'),
    build: !flags['no-build'],
    ui: !flags['no-ui'],
    log: (m) => console.log(`  ${m}`),
  });
  try {
    cluster = await starting;
  } catch (err) {
    console.error(`the cluster did not start: ${(err as Error).message}`);
    process.exit(1);
  }
  if (stopping) return;
  const c = cluster;
  const key = c.demo?.apiKey ?? '<your app api key>';
  const pids = Object.fromEntries(c.processes().map((p) => [p.name, p.pid]));
  const line = (name: string, what: string) => `  ${name.padEnd(20)} ${what}${pids[name] ? `   (pid ${pids[name]})` : ''}`;
  console.log(`
The cluster is up. Every process below is separate; logs in ${c.logDir}

${line('api (balancer)', `${c.apiUrl}   → ${ports.apiReplicas.map((p) => `127.0.0.1:${p}`).join(', ')}`)}
${c.apis.map((s, i) => line(s.name, `http://127.0.0.1:${ports.apiReplicas[i]}`)).join('\n')}
${line('backend (balancer)', `${c.backendUrl}   → ${ports.backendReplicas.map((p) => `127.0.0.1:${p}`).join(', ')}`)}
${c.backends.map((s, i) => line(s.name, `http://127.0.0.1:${ports.backendReplicas[i]}`)).join('\n')}
${c.workers.map((s, i) => line(s.name, `task queue ${c.taskQueue}, health http://127.0.0.1:${ports.workerHealth[i]}/healthz`)).join('\n')}
${(['frontend', 'history', 'matching', 'worker'] as const).map((s) => line(`temporal-${s}`, `127.0.0.1:${ports.temporal.grpc[s]}`)).join('\n')}
${line('Temporal UI', c.uiUrl ?? '(not available)')}
${line('postgres', config.DATABASE_URL ? 'DATABASE_URL (databases dify_agent, temporal, temporal_visibility)' : `embedded, 127.0.0.1:${ports.postgres} (dify_agent, temporal, temporal_visibility)`)}

  chat in the browser  ${c.apiUrl}/chat/#key=${key}
  app api key          ${key}
  console key          ${c.demo?.consoleKey ?? '-'}

curl -N ${c.apiUrl}/v1/chat-messages -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\
  -d '{"inputs": {}, "query": "Hello from the cluster", "user": "demo-user", "response_mode": "streaming"}'

Find a conversation's turns in the Temporal UI with:  ConversationId = '<conversation id>'
Press Ctrl-C to stop everything.
`);
}
