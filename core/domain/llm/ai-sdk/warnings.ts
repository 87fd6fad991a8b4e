/** The AI SDK's call warnings (a stream's `stream-start` part) in the gateway's terms (provider.ts ProviderWarning). */
import type { SharedV3Warning } from '@ai-sdk/provider';
import type { ProviderWarning } from '../provider.js';

export function toProviderWarning(w: SharedV3Warning): ProviderWarning {
  if (w.type === 'other') return { type: 'other', details: w.message };
  return { type: w.type, feature: w.feature, ...(w.details ? { details: w.details } : {}) };
}
