/**
 * How long a stream's text is gathered before it is written (the agent backend's delta coalescing, runAgent's
 * `agent_message` debounce): `baseMs` while the stream is young, then one more `baseMs` per second of its age, up to
 * `MAX_FACTOR` × `baseMs`. A fixed window makes the number of writes grow with the stream's duration, and a loaded
 * system stretches every stream: at 32 concurrent turns a 200-token answer took 5 s instead of 1 and cost 35 backend
 * events and 32 client events instead of ~17 and ~13 (bench/README.md), more writes exactly when writes are what the
 * system is short of. With the window growing, a 1 s answer is written ~7 times, a 5 s one ~21 times instead of 50.
 * The first text of a part is never held (time to first token), and a reader still sees text at least every
 * `MAX_FACTOR` × `baseMs` (× the load factor below).
 *
 * The window also grows with load (docs/decisions/0014): with `inFlight` streams in the process it is multiplied by
 * `loadFactor(inFlight)` — 1 alone, +1 per `LOAD_STEP` further streams, at most `LOAD_MAX_FACTOR` — so a stream
 * alone is written as often as before and a busy process writes each stream less often.
 */
export const MAX_FACTOR = 3;
export const LOAD_STEP = 8;
export const LOAD_MAX_FACTOR = 2;

export function loadFactor(inFlight: number): number {
  return Math.min(LOAD_MAX_FACTOR, 1 + Math.max(0, inFlight - 1) / LOAD_STEP);
}

export function streamWindowMs(baseMs: number, ageMs: number, inFlight = 1): number {
  return Math.min(baseMs * MAX_FACTOR, baseMs * (1 + Math.max(0, ageMs) / 1000)) * loadFactor(inFlight);
}

/**
 * Under load, a window ends on the next `slotMs` boundary of the clock at or after `windowMs` from `now`, so the
 * writes of many streams fall due together and go out in one statement (group commit); alone (`inFlight` ≤ 1) it
 * ends exactly `windowMs` from now.
 */
export function windowDelayMs(now: number, windowMs: number, slotMs: number, inFlight: number): number {
  if (inFlight <= 1 || slotMs <= 0) return windowMs;
  return Math.ceil((now + windowMs) / slotMs) * slotMs - now;
}
