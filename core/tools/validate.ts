/** Soul-config checks that need the tool-provider tables (issue 14): each referenced provider and tool exists. */
import type { Db } from '../db.js';
import type { AgentSoulConfig } from '../soul.js';
import type { SoulIssue } from '../soul-issues.js';

export async function checkToolRefs(_db: Db, _tenantId: string, _soul: AgentSoulConfig): Promise<SoulIssue[]> {
  return [];
}
