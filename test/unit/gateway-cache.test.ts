/** The gateway cache's invalidation rules (core/domain/llm/gateway-cache.ts), on a fake notification source and clock. */
import { describe, expect, it } from 'vitest';
import { encryptJson, CredentialsDecryptError } from '../../core/domain/llm/credentials.js';
import { GATEWAY_CACHE_CHANNEL, GatewayCache, type InvalidationSource } from '../../core/domain/llm/gateway-cache.js';

const KEY = Buffer.alloc(32, 3);
const T = '00000000-0000-4000-8000-000000000001';
const U = '00000000-0000-4000-8000-000000000002';

function fakeSource() {
  const fns = new Set<(payload?: string) => void>();
  const source: InvalidationSource & { up: boolean; send(payload?: string): void; handlers: number } = {
    up: true,
    listensTo: (channel) => source.up && channel === GATEWAY_CACHE_CHANNEL,
    onChannel: (channel, fn) => {
      expect(channel).toBe(GATEWAY_CACHE_CHANNEL);
      fns.add(fn);
      return () => void fns.delete(fn);
    },
    send: (payload) => fns.forEach((fn) => fn(payload)),
    get handlers() {
      return fns.size;
    },
  };
  return source;
}

function setup(ttlMs = 5_000) {
  const source = fakeSource();
  let now = 1_000;
  const cache = new GatewayCache(source, { ttlMs, now: () => now });
  return { source, cache, advance: (ms: number) => (now += ms) };
}

describe('gateway cache', () => {
  it('keeps credentials and pools until a notification names them', () => {
    const { source, cache } = setup();
    cache.putCredentials(cache.token(), T, 'openai', 'x');
    cache.putCredentials(cache.token(), T, 'anthropic', null);
    cache.putCredentials(cache.token(), U, 'openai', 'y');
    cache.putPool(cache.token(), T, { exists: true, exhausted: false });
    cache.putPool(cache.token(), U, { exists: false });

    source.send(`c:${T}:openai`);
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
    expect(cache.getCredentials(T, 'anthropic')?.encrypted).toBeNull();
    expect(cache.getCredentials(U, 'openai')?.encrypted).toBe('y');
    expect(cache.getPool(T)).toEqual({ exists: true, exhausted: false });

    source.send(`p:${T}`);
    expect(cache.getPool(T)).toBeUndefined();
    expect(cache.getPool(U)).toEqual({ exists: false });

    source.send(`c:${U}`);
    expect(cache.getCredentials(U, 'openai')).toBeUndefined();
    expect(cache.getCredentials(T, 'anthropic')).toBeDefined();
  });

  it('drops everything on a payload it does not know and on a (re)subscribe (no payload)', () => {
    const { source, cache } = setup();
    cache.putCredentials(cache.token(), T, 'openai', 'x');
    cache.putPool(cache.token(), U, { exists: false });
    source.send('*');
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
    expect(cache.getPool(U)).toBeUndefined();

    cache.putCredentials(cache.token(), T, 'openai', 'x');
    source.send(undefined);
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
  });

  it('does not keep a fill whose read raced an invalidation', () => {
    const { source, cache } = setup();
    const token = cache.token(); // the read starts
    source.send(`c:${T}:openai`); // a write commits meanwhile
    cache.putCredentials(token, T, 'openai', 'old');
    cache.putPool(token, T, { exists: true, exhausted: false });
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
    expect(cache.getPool(T)).toBeUndefined();
  });

  it('is bypassed while the channel is not listened to, and entries end after the TTL', () => {
    const { source, cache, advance } = setup(5_000);
    cache.putCredentials(cache.token(), T, 'openai', 'x');
    source.up = false;
    expect(cache.active).toBe(false);
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
    cache.putCredentials(cache.token(), T, 'openai', 'x');
    source.up = true;
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();

    cache.putCredentials(cache.token(), T, 'openai', 'x');
    advance(4_999);
    expect(cache.getCredentials(T, 'openai')?.encrypted).toBe('x');
    advance(1);
    expect(cache.getCredentials(T, 'openai')).toBeUndefined();
  });

  it("notePool replaces a pool entry with this process's own write, and adds none", () => {
    const { cache } = setup();
    cache.notePool(T, true);
    expect(cache.getPool(T)).toBeUndefined();
    cache.putPool(cache.token(), T, { exists: true, exhausted: false });
    cache.notePool(T, true);
    expect(cache.getPool(T)).toEqual({ exists: true, exhausted: true });
  });

  it('decrypts once per key and keeps a decryption failure a failure', () => {
    const { cache } = setup();
    const stored = cache.putCredentials(cache.token(), T, 'openai', encryptJson(KEY, { api_key: 'sk-1' }));
    const first = stored.open(KEY);
    expect(first).toEqual({ api_key: 'sk-1' });
    expect(stored.open(Buffer.from(KEY))).toBe(first);
    expect(() => stored.open(Buffer.alloc(32, 9))).toThrow(CredentialsDecryptError);
    expect(cache.putCredentials(cache.token(), T, 'x', null).open(KEY)).toBeNull();
  });

  it('unsubscribes on close', () => {
    const { source, cache } = setup();
    expect(source.handlers).toBe(1);
    cache.close();
    expect(source.handlers).toBe(0);
  });
});
