/**
 * Soul-config checks that need the tool-provider table (issue 14 §5): each `tools.plugin` ref names a provider of
 * the tenant and a tool that provider has (its cached tool list). Run when a config is saved and before a turn.
 */
import type { Db } from '../../platform/db.js';
import type { AgentSoulConfig } from '../soul.js';
import type { SoulIssue } from '../soul-issues.js';
import { providersByName, toolsOf } from './providers.js';

export async function checkToolRefs(db: Db, tenantId: string, soul: AgentSoulConfig): Promise<SoulIssue[]> {
  const refs = soul.tools.plugin;
  if (refs.length === 0) return [];
  const providers = await providersByName(
    db,
    tenantId,
    refs.map((r) => r.provider),
  );
  const issues: SoulIssue[] = [];
  refs.forEach((ref, i) => {
    const provider = providers.get(ref.provider);
    if (!provider) {
      issues.push({ path: ['tools', 'plugin', i, 'provider'], message: `no tool provider named ${ref.provider} in this workspace` });
      return;
    }
    const names = toolsOf(provider).map((t) => t.name);
    if (!names.includes(ref.name)) {
      const known = names.length > 10 ? `${names.slice(0, 10).join(', ')}, …` : names.join(', ');
      issues.push({
        path: ['tools', 'plugin', i, 'name'],
        message: `the tool provider ${ref.provider} has no tool ${ref.name} (it has ${known})`,
      });
    }
  });
  return issues;
}
