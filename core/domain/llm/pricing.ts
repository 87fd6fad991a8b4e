/**
 * The arithmetic that turns token counts into the `Usage` prices of run.ts. Prices come from the model
 * catalogue (catalogue/*.json, docs/models.md) as decimal strings (Dify's convention): price = tokens ×
 * unit_price × price_unit, with unit_price quoted per 1M tokens (price_unit 0.000001). Prompt tokens read from
 * the provider's cache cost `cached_input` instead of `input`. Credits are integer micro-units of the
 * currency, rounded up so any billed call costs at least one credit. All math is BigInt: no floats.
 */
import type { Usage } from '../../protocol/run.js';
import { BUILTIN_CATALOGUE } from './catalogue/index.js';

export interface ModelPrice {
  /** Currency per 1M prompt tokens, decimal string. */
  input: string;
  /** Currency per 1M completion tokens, decimal string. */
  output: string;
  /** Currency per 1M cached prompt tokens (default: input). */
  cached_input?: string;
  currency: string;
}

export const PRICE_UNIT = '0.000001';

const FREE: ModelPrice = { input: '0', output: '0', currency: 'USD' };

/** The built-in catalogue's prices of a model (an open provider's defaults for an undeclared one); free when unknown. */
export function priceFor(provider: string, model: string): ModelPrice {
  return BUILTIN_CATALOGUE.resolve(provider, model)?.prices ?? FREE;
}

/**
 * Whether calls at these prices cost nothing (a system-hosted Ollama: the deployment's own hardware): such calls
 * are not billed, so neither listed as billed nor refused when the credit pool is used up.
 */
export function isFree(p: ModelPrice): boolean {
  return [p.input, p.output, p.cached_input ?? '0'].every((v) => parseDecimal(v) === 0n);
}

// ---- decimal arithmetic ----------------------------------------------------------------------

/** Internal fixed-point scale: 12 decimals for each factor. */
const SCALE = 12;
/** Decimals of the stored/reported prices (credit_ledger.total_price is DECIMAL(14,7)). */
export const PRICE_DECIMALS = 7;

export function parseDecimal(value: string, scale = SCALE): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(value.trim());
  if (!m) throw new Error(`not a decimal: ${JSON.stringify(value)}`);
  const frac = (m[3] ?? '').padEnd(scale, '0');
  if (frac.length > scale && /[1-9]/.test(frac.slice(scale))) throw new Error(`too many decimals: ${value}`);
  const n = BigInt(m[2] + frac.slice(0, scale));
  return m[1] === '-' ? -n : n;
}

export function formatDecimal(value: bigint, scale: number): string {
  const neg = value < 0n;
  const digits = (neg ? -value : value).toString().padStart(scale + 1, '0');
  const int = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale);
  return `${neg ? '-' : ''}${int}${scale > 0 ? '.' + frac : ''}`;
}

function divRound(n: bigint, d: bigint, mode: 'half-up' | 'ceil'): bigint {
  const q = n / d;
  const r = n % d;
  if (r === 0n) return q;
  if (mode === 'ceil') return q + 1n;
  return r * 2n >= d ? q + 1n : q;
}

/** tokens × unit_price × price_unit at scale 2·SCALE. */
function exactPrice(tokens: number, unitPrice: string): bigint {
  return BigInt(tokens) * parseDecimal(unitPrice) * parseDecimal(PRICE_UNIT);
}

export interface PricedTokens {
  prompt_tokens: number;
  completion_tokens: number;
  /** Of prompt_tokens, those read from the provider's prompt cache. */
  cached_prompt_tokens?: number;
}

export interface Priced {
  usage: Pick<
    Usage,
    | 'prompt_tokens'
    | 'completion_tokens'
    | 'total_tokens'
    | 'prompt_unit_price'
    | 'prompt_price_unit'
    | 'prompt_price'
    | 'completion_unit_price'
    | 'completion_price_unit'
    | 'completion_price'
    | 'total_price'
    | 'currency'
  >;
  /** Integer micro-units of currency (rounded up). */
  credits: bigint;
}

export function priceUsage(tokens: PricedTokens, price: ModelPrice): Priced {
  const cached = Math.min(tokens.cached_prompt_tokens ?? 0, tokens.prompt_tokens);
  const p =
    cached > 0 && price.cached_input !== undefined
      ? exactPrice(tokens.prompt_tokens - cached, price.input) + exactPrice(cached, price.cached_input)
      : exactPrice(tokens.prompt_tokens, price.input);
  const c = exactPrice(tokens.completion_tokens, price.output);
  const toPrice = (v: bigint) => formatDecimal(divRound(v, 10n ** BigInt(2 * SCALE - PRICE_DECIMALS), 'half-up'), PRICE_DECIMALS);
  return {
    usage: {
      prompt_tokens: tokens.prompt_tokens,
      completion_tokens: tokens.completion_tokens,
      total_tokens: tokens.prompt_tokens + tokens.completion_tokens,
      prompt_unit_price: price.input,
      prompt_price_unit: PRICE_UNIT,
      prompt_price: toPrice(p),
      completion_unit_price: price.output,
      completion_price_unit: PRICE_UNIT,
      completion_price: toPrice(c),
      total_price: toPrice(p + c),
      currency: price.currency,
    },
    credits: divRound(p + c, 10n ** BigInt(2 * SCALE - 6), 'ceil'),
  };
}
