/**
 * What the history recorders share (scripts/record-histories.ts, scripts/record-queue-histories.ts): a throwaway
 * Temporal dev server with a client and a worker connection, and a workflow's history written as the CLI's JSON (the
 * canonical format that historyFromJSON and the Web UI's export read).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { freePort } from '../stack/ports.js';
import { locateTemporal, startTemporalDevServer } from '../stack/temporal.js';

export interface RecordingServer {
  client: Client;
  native: NativeConnection;
  /** Writes `workflowId`'s history to `<outDir>/<name>.json`. */
  writeHistory(workflowId: string, outDir: string, name: string): void;
}

export async function withRecordingServer(prefix: string, run: (server: RecordingServer) => Promise<void>): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  const bin = await locateTemporal({});
  const temporal = await startTemporalDevServer({ bin, dataDir, port: await freePort(), uiPort: await freePort(), headless: true });
  const connection = await Connection.connect({ address: temporal.address });
  const native = await NativeConnection.connect({ address: temporal.address });
  try {
    await run({
      client: new Client({ connection }),
      native,
      writeHistory(workflowId, outDir, name) {
        const args = ['workflow', 'show', '--address', temporal.address, '--workflow-id', workflowId, '--output', 'json'];
        const json = execFileSync(bin, args, { encoding: 'utf8' });
        fs.mkdirSync(outDir, { recursive: true });
        fs.writeFileSync(path.join(outDir, `${name}.json`), json);
        console.log(`recorded ${name}: ${(JSON.parse(json) as { events: unknown[] }).events.length} events`);
      },
    });
  } finally {
    await connection.close();
    await native.close();
    await temporal.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
