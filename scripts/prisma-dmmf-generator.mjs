#!/usr/bin/env node
// A tiny Prisma generator (JSON-RPC over stdin/stderr, the protocol of @prisma/generator-helper)
// that writes the datamodel DMMF to a JSON file. test/integration/schema.test.ts compares it with
// the migrated database, since Prisma's own `migrate diff` needs an engine binary we cannot fetch.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

const rl = readline.createInterface({ input: process.stdin });
const reply = (id, result) => process.stderr.write(JSON.stringify({ jsonrpc: '2.0', id, result }) + '\n');
rl.on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.method === 'getManifest') {
    reply(msg.id, { manifest: { prettyName: 'DMMF JSON', defaultOutput: '../core/generated/dmmf.json', requiresGenerators: [] } });
  } else if (msg.method === 'generate') {
    const out = msg.params.generator.output?.value ?? path.resolve('core/generated/dmmf.json');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(msg.params.dmmf.datamodel, null, 1));
    reply(msg.id, null);
  }
});
