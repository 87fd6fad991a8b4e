/** Soul-config checks that need the knowledge tables (issue 14): the datasets exist in the tenant. */
import type { Db } from '../../platform/db.js';
import type { AgentSoulConfig } from '../soul.js';
import type { SoulIssue } from '../soul-issues.js';

export async function checkKnowledgeConfig(db: Db, tenantId: string, soul: AgentSoulConfig): Promise<SoulIssue[]> {
  const ids = soul.knowledge.dataset_ids;
  if (!soul.knowledge.enabled || ids.length === 0) return [];
  const found = await db.dataset.findMany({ where: { tenant_id: tenantId, id: { in: ids } }, select: { id: true } });
  const known = new Set(found.map((d) => d.id));
  const issues: SoulIssue[] = [];
  ids.forEach((id, i) => {
    // Another tenant's dataset reads as missing: its existence is not confirmed.
    if (!known.has(id)) issues.push({ path: ['knowledge', 'dataset_ids', i], message: `dataset ${id} does not exist` });
    else if (ids.indexOf(id) !== i) issues.push({ path: ['knowledge', 'dataset_ids', i], message: `dataset ${id} is listed twice` });
  });
  return issues;
}
