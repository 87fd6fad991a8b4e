/**
 * The citations a turn's end carries (issue 42 problem 6, core/domain/knowledge/citations.ts): read in the terminal
 * transaction, since the api records what it retrieved on the message while the run goes on. Nothing is read for a
 * message whose config did not ask for citations (the mark its preparation left).
 */
import type { Prisma } from '../core/platform/db.js';
import { citationsOn, retrieverResources } from '../core/domain/knowledge/citations.js';
import type { RetrieverResource } from '../core/protocol/retriever-resource.js';

type Reader = Pick<Prisma.TransactionClient, 'message'>;

export async function turnCitations(tx: Reader, msg: { id: string; metadata: unknown }): Promise<RetrieverResource[] | null> {
  if (!citationsOn(msg.metadata)) return null;
  const row = await tx.message.findUnique({ where: { id: msg.id }, select: { metadata: true } });
  return retrieverResources(row?.metadata ?? msg.metadata);
}
