/**
 * How long a stream's text is gathered before it is written (the agent backend's delta coalescing, runAgent's
 * `agent_message` debounce): `baseMs` while the stream is young, then one more `baseMs` per second of its age, up to
 * `MAX_FACTOR` × `baseMs`. A fixed window makes the number of writes grow with the stream's duration, and a loaded
 * system stretches every stream: at 32 concurrent turns a 200-token answer took 5 s instead of 1 and cost 35 backend
 * events and 32 client events instead of ~17 and ~13 (bench/README.md), more writes exactly when writes are what the
 * system is short of. With the window growing, a 1 s answer is written ~7 times, a 5 s one ~21 times instead of 50.
 * The first text of a part is never held (time to first token), and a reader still sees text at least every
 * `MAX_FACTOR` × `baseMs`.
 */
export const MAX_FACTOR = 3;

export function streamWindowMs(baseMs: number, ageMs: number): number {
  return Math.min(baseMs * MAX_FACTOR, baseMs * (1 + Math.max(0, ageMs) / 1000));
}
