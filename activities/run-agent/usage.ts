/**
 * What a finished run leaves on the message (usage, prices, and the caller's own fields: status, answer, …) in one
 * update, and on its binding (the session snapshot). One statement per row: each is a round trip inside the terminal
 * transaction, which the client's `message_end` waits for.
 */
import type { Prisma } from '../../core/db.js';
import type { SessionSnapshot, Usage } from '../../core/protocol/run.js';
import type { Tx } from './commit.js';
import type { RunScope } from './scope.js';

export async function saveUsageAndSnapshot(
  scope: RunScope,
  tx: Tx,
  usage: Usage | null | undefined,
  snapshot: SessionSnapshot | null | undefined,
  message: Prisma.MessageUpdateInput,
): Promise<void> {
  await tx.message.update({
    where: { id: scope.msg.id },
    data: {
      ...message,
      ...(usage && {
        message_tokens: usage.prompt_tokens,
        answer_tokens: usage.completion_tokens,
        total_tokens: usage.total_tokens,
        message_unit_price: usage.prompt_unit_price,
        message_price_unit: usage.prompt_price_unit,
        answer_unit_price: usage.completion_unit_price,
        answer_price_unit: usage.completion_price_unit,
        total_price: usage.total_price,
        currency: usage.currency,
        provider_response_latency: usage.latency,
        time_to_first_token: usage.time_to_first_token,
        usage: usage as unknown as Prisma.InputJsonValue,
      }),
    },
  });
  // A null snapshot leaves the stored one untouched (docs/seeds/001).
  if (snapshot && scope.bindingId) {
    await tx.agentWorkspaceBinding.update({
      where: { id: scope.bindingId },
      data: { session_snapshot: snapshot as unknown as Prisma.InputJsonValue },
    });
  }
}
