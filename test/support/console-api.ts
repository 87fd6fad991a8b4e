/**
 * The console API as a test calls it: one JSON request with the demo account's console key, the status and the parsed
 * body back (null for an empty one). The many test files that spelled this out each bind it to their stack with
 * `consoleClient(() => stack)`.
 */
import type { Stack } from '../../stack/start-stack.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export type ConsoleApi = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: Json }>;

/** A console client for the stack `current()` returns when a request is made (the stack starts in beforeAll). */
export function consoleClient(current: () => Stack): ConsoleApi {
  return async (method, path, body) => {
    const stack = current();
    const res = await fetch(`${stack.apiUrl}/console/api${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
}
