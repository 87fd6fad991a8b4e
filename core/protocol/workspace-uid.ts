/**
 * The uid/gid a workspace's commands run as (issue 27): SHELL_UID_BASE + FNV-1a 32 of the lowercase workspace id
 * modulo SHELL_UID_RANGE, gid the same. Deterministic, so every backend replica (and the api, should it need to
 * place files owned by it) derives the same owner without shared state; distinct workspaces get distinct uids
 * unless their hashes collide within the range (1 in SHELL_UID_RANGE per pair).
 */

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function workspaceUid(workspaceId: string, opts: { base: number; range: number }): { uid: number; gid: number } {
  const uid = opts.base + (fnv1a32(workspaceId.toLowerCase()) % opts.range);
  return { uid, gid: uid };
}
