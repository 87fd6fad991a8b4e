/**
 * A turn's usage as billed: the credit-ledger rows of its backend run, summed (issue 30). Used wherever a turn ends
 * without a terminal usage from the backend — a run failed by the reaper (`backend_restarted`), a stop the backend did
 * not confirm, a turn failed or stopped by the workflow's own steps, the sweeper — so the message's tokens and prices,
 * its `message_end` / `error` metadata and GET /v1/messages always equal what the ledger charged. Read inside the
 * terminal's own transaction, so the figures and the terminal commit together.
 */
import type { Prisma } from '../core/platform/db.js';
import { formatDecimal, parseDecimal, priceFor, priceUsage, PRICE_DECIMALS } from '../core/domain/llm/pricing.js';
import { emptyUsage, Usage } from '../core/protocol/run.js';

type Reader = Pick<Prisma.TransactionClient, '$queryRaw'>;

interface LedgerRow {
  provider: string;
  model: string;
  currency: string;
  prompt_tokens: number;
  completion_tokens: number;
  total_price: string;
  estimated: boolean;
}

/** The summed ledger rows of `backendRunId` (zero usage when there is no run or nothing was billed). */
export async function ledgerUsage(tx: Reader, backendRunId: string | null | undefined): Promise<Usage> {
  if (!backendRunId) return emptyUsage();
  const rows = await tx.$queryRaw<LedgerRow[]>`
    select provider, model, currency, prompt_tokens, completion_tokens, total_price::text as total_price, estimated
      from credit_ledger where agent_run_id = ${backendRunId} order by billing_request_id`;
  return sumLedgerRows(rows);
}

/** The rows as one Usage: tokens and the stored total price added exactly; prompt/completion prices from the price table. */
export function sumLedgerRows(rows: LedgerRow[]): Usage {
  if (rows.length === 0) return emptyUsage();
  let prompt = 0;
  let completion = 0;
  let promptPrice = 0n;
  let completionPrice = 0n;
  let total = 0n;
  for (const r of rows) {
    prompt += r.prompt_tokens;
    completion += r.completion_tokens;
    const priced = priceUsage(r, priceFor(r.provider, r.model)).usage;
    promptPrice += parseDecimal(priced.prompt_price, PRICE_DECIMALS);
    completionPrice += parseDecimal(priced.completion_price, PRICE_DECIMALS);
    total += parseDecimal(r.total_price, PRICE_DECIMALS);
  }
  const models = new Set(rows.map((r) => `${r.provider}/${r.model}`));
  const unit = models.size === 1 ? priceFor(rows[0]!.provider, rows[0]!.model) : null;
  return Usage.parse({
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(unit ? { prompt_unit_price: unit.input, completion_unit_price: unit.output } : {}),
    prompt_price: formatDecimal(promptPrice, PRICE_DECIMALS),
    completion_price: formatDecimal(completionPrice, PRICE_DECIMALS),
    total_price: formatDecimal(total, PRICE_DECIMALS),
    currency: rows[0]!.currency,
    model_requests: rows.length,
    ...(rows.some((r) => r.estimated) ? { estimated: true } : {}),
  });
}

/** The message columns a usage fills (one shape for every writer). */
export function usageColumns(usage: Usage): Prisma.MessageUpdateInput {
  return {
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
  };
}
