/**
 * Usage of one run, summed over its model calls: tokens, prices (decimal strings added exactly),
 * latency, time to first token, model requests and tool calls. Carried by every terminal event.
 */
import type { LanguageModelUsage } from 'ai';
import { priceUsage, type ModelPrice } from '../core/domain/llm/pricing.js';
import { estimatedTokens } from '../core/domain/llm/tokens.js';
import type { PromptMessage } from '../core/protocol/inner-llm.js';
import { emptyUsage, type ModelCallUsage, type Usage } from '../core/protocol/run.js';
import { addDecimal } from './decimal.js';

export class UsageMeter {
  modelRequests = 0;
  toolCalls = 0;
  private readonly usage: Usage = emptyUsage();
  private firstTokenAt: number | null = null;
  /** Some counts were estimated (a cut call, or a model that reported none). */
  private estimated = false;

  constructor(private readonly startedAt = Date.now()) {}

  /** Counts a model request and returns its call index (0-based within the run). */
  beginModelRequest(): number {
    return this.modelRequests++;
  }

  markFirstToken(): void {
    if (this.firstTokenAt === null) this.firstTokenAt = Date.now();
  }

  /**
   * Prefers the usage the inner endpoint reported (with prices; `providerMetadata.dify.usage` of the
   * step's `finish-step` part); falls back to the AI SDK token counts.
   */
  addModelUsage(
    reported: Partial<Usage> | undefined,
    tokens?: Pick<LanguageModelUsage, 'inputTokens' | 'outputTokens'>,
  ): Omit<ModelCallUsage, 'latency'> {
    const u = this.usage;
    if (reported) {
      if (reported.estimated) this.estimated = true;
      const p = reported.prompt_tokens ?? 0;
      const c = reported.completion_tokens ?? 0;
      u.prompt_tokens += p;
      u.completion_tokens += c;
      u.total_tokens += reported.total_tokens ?? p + c;
      u.prompt_price = addDecimal(u.prompt_price, reported.prompt_price ?? '0');
      u.completion_price = addDecimal(u.completion_price, reported.completion_price ?? '0');
      u.total_price = addDecimal(
        u.total_price,
        reported.total_price ?? addDecimal(reported.prompt_price ?? '0', reported.completion_price ?? '0'),
      );
      if (reported.prompt_unit_price && reported.prompt_unit_price !== '0') u.prompt_unit_price = reported.prompt_unit_price;
      if (reported.completion_unit_price && reported.completion_unit_price !== '0')
        u.completion_unit_price = reported.completion_unit_price;
      if (reported.prompt_price_unit) u.prompt_price_unit = reported.prompt_price_unit;
      if (reported.completion_price_unit) u.completion_price_unit = reported.completion_price_unit;
      if (reported.currency) u.currency = reported.currency;
      return {
        prompt_tokens: p,
        completion_tokens: c,
        total_price: reported.total_price ?? addDecimal(reported.prompt_price ?? '0', reported.completion_price ?? '0'),
        currency: reported.currency ?? u.currency,
      };
    }
    const p = tokens?.inputTokens ?? 0;
    const c = tokens?.outputTokens ?? 0;
    u.prompt_tokens += p;
    u.completion_tokens += c;
    u.total_tokens += p + c;
    return { prompt_tokens: p, completion_tokens: c, total_price: '0', currency: u.currency };
  }

  /**
   * A model call cut before it reported usage (a stop): the provider still charges for the prompt and
   * for what it generated, so both count, estimated with the tokenizer and priced like the gateway
   * prices them (which records the same call, estimated, under its billing id).
   */
  addCutModelCall(prompt: PromptMessage[], generated: string, price: ModelPrice): void {
    this.addModelUsage(priceUsage(estimatedTokens(prompt, generated), price).usage);
    this.estimated = true;
  }

  snapshot(now = Date.now()): Usage {
    return {
      ...this.usage,
      latency: round3((now - this.startedAt) / 1000),
      time_to_first_token: this.firstTokenAt === null ? null : round3((this.firstTokenAt - this.startedAt) / 1000),
      time_to_generate: this.firstTokenAt === null ? null : round3((now - this.firstTokenAt) / 1000),
      model_requests: this.modelRequests,
      tool_calls: this.toolCalls,
      ...(this.estimated ? { estimated: true } : {}),
    };
  }
}

const round3 = (n: number) => Math.round(Math.max(0, n) * 1000) / 1000;
