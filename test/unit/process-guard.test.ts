/** core/platform/process-guard.ts (issue 28 item 1): an error no handler caught is logged at fatal with its stack and counted. */
import { describe, expect, it, vi } from 'vitest';
import { handleUncaught, uncaughtErrors } from '../../core/platform/process-guard.js';

describe('process guard', () => {
  it('counts an uncaught error by kind and class and keeps the process (policy log)', async () => {
    const before =
      (await uncaughtErrors.get()).values.find((v) => v.labels.kind === 'uncaught_exception' && v.labels.error === 'TypeError')?.value ?? 0;
    const spy = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    try {
      handleUncaught('uncaught_exception', new TypeError('boom'));
      handleUncaught('unhandled_rejection', 'a string');
    } finally {
      spy.mockRestore();
    }
    const values = (await uncaughtErrors.get()).values;
    expect(values.find((v) => v.labels.kind === 'uncaught_exception' && v.labels.error === 'TypeError')?.value).toBe(before + 1);
    expect(values.find((v) => v.labels.kind === 'unhandled_rejection' && v.labels.error === 'string')?.value).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 150));
    expect(exit).not.toHaveBeenCalled();
    exit.mockRestore();
  });
});
