/** The workflow bundle builds: no Node, I/O, Prisma or express import can sneak into workflows/. */
import { bundleWorkflowCode } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { WORKFLOWS_PATH } from '../../worker/start.js';

describe('workflows bundle', () => {
  it('bundles workflows/ with the Temporal bundler and exports agentTurn', async () => {
    const { code } = await bundleWorkflowCode({
      workflowsPath: WORKFLOWS_PATH,
      logger: {
        log: () => undefined,
        info: () => undefined,
        warn: () => undefined,
        error: () => undefined,
        debug: () => undefined,
        trace: () => undefined,
      } as never,
    });
    expect(code).toContain('agentTurn');
    // Every bundled module is workflow code or a sandbox-safe dependency; nothing that does I/O.
    const modules = [...code.matchAll(/^\/\*{3}\/ "(\.\/[^"]+)"$/gm)].map((m) => m[1]!);
    expect(modules).toContain('./workflows/agent-turn.ts');
    // core/protocol/workflow-contract.ts: the workflows' names and inputs their starters and activities share (plain
    // constants and types, no imports of its own but a type).
    const allowed =
      /^\.\/(workflows\/|core\/protocol\/workflow-contract\.ts$|node_modules\/(@temporalio\/(workflow|common)|nexus-rpc|long|ms)\/)/;
    expect(modules.filter((m) => !allowed.test(m))).toEqual([]);
  });

  it('fails when a workflow imports a Node module (the guard is real)', async () => {
    const fs = await import('node:fs');
    const path = await import('node:path');
    const os = await import('node:os');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wf-bad-'));
    const file = path.join(dir, 'bad.ts');
    fs.writeFileSync(file, "import fs from 'node:fs';\nexport async function bad() { return fs.readFileSync('/etc/hostname', 'utf8'); }\n");
    await expect(
      bundleWorkflowCode({
        workflowsPath: file,
        logger: {
          log: () => undefined,
          info: () => undefined,
          warn: () => undefined,
          error: () => undefined,
          debug: () => undefined,
          trace: () => undefined,
        } as never,
      }),
    ).rejects.toThrow();
  });
});
