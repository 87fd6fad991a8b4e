import { describe, expect, it } from 'vitest';
import { toFinishReason } from './finish-reason.js';

describe('finish-reason mapping', () => {
  it('maps the unified reasons to the inner protocol', () => {
    expect(toFinishReason({ unified: 'stop', raw: 'end_turn' }, false)).toBe('stop');
    expect(toFinishReason({ unified: 'length', raw: 'max_tokens' }, false)).toBe('length');
    expect(toFinishReason({ unified: 'content-filter', raw: 'SAFETY' }, false)).toBe('content_filter');
    expect(toFinishReason({ unified: 'tool-calls', raw: 'tool_use' }, true)).toBe('tool_calls');
    expect(toFinishReason({ unified: 'stop', raw: 'STOP' }, true)).toBe('tool_calls');
    expect(toFinishReason({ unified: 'other', raw: undefined }, false)).toBe('stop');
    expect(toFinishReason(undefined, true)).toBe('tool_calls');
  });
});
