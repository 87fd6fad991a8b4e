/** The workspace identity marker (issue 31, agent-backend/workspace/marker.ts): new, own, lost, foreign, legacy. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunRefusedError } from '../../agent-backend/errors.js';
import { checkWorkspaceMarker, MARKER_FILE, readMarker, writeMarker } from '../../agent-backend/workspace/marker.js';

const id = { workspaceId: '11111111-1111-4111-8111-111111111111', generation: 1 };
const scratch = () => fs.mkdtempSync(path.join(os.tmpdir(), 'marker-'));

function lostReason(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    expect(err).toBeInstanceOf(RunRefusedError);
    return (err as RunRefusedError).reason;
  }
}

describe('workspace marker', () => {
  it('a new workspace gets a marker that later entries accept', () => {
    const dir = path.join(scratch(), 'ws');
    expect(checkWorkspaceMarker(dir, id, false)).toEqual({ write: true });
    fs.mkdirSync(dir);
    writeMarker(dir, id);
    expect(readMarker(dir)).toEqual(id);
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
    // Written once: an existing marker is never overwritten.
    writeMarker(dir, { ...id, generation: 9 });
    expect(readMarker(dir)).toEqual(id);
  });

  it('expected but missing, foreign, another generation or not a marker: binding_lost', () => {
    const root = scratch();
    expect(lostReason(() => checkWorkspaceMarker(path.join(root, 'gone'), id, true))).toBe('binding_lost');
    const foreign = path.join(root, 'foreign');
    fs.mkdirSync(foreign);
    writeMarker(foreign, { workspaceId: '22222222-2222-4222-8222-222222222222', generation: 1 });
    expect(lostReason(() => checkWorkspaceMarker(foreign, id, false))).toBe('binding_lost');
    const older = path.join(root, 'older');
    fs.mkdirSync(older);
    writeMarker(older, { ...id, generation: 2 });
    expect(lostReason(() => checkWorkspaceMarker(older, id, true))).toBe('binding_lost');
    const linked = path.join(root, 'linked');
    fs.mkdirSync(linked);
    fs.symlinkSync(path.join(foreign, MARKER_FILE), path.join(linked, MARKER_FILE));
    expect(readMarker(linked)).toBe('invalid');
    expect(lostReason(() => checkWorkspaceMarker(linked, id, true))).toBe('binding_lost');
    // Recreated by something else (files placed for the turn) but never entered: still lost.
    const placed = path.join(root, 'placed');
    fs.mkdirSync(path.join(placed, 'uploads'), { recursive: true });
    expect(lostReason(() => checkWorkspaceMarker(placed, id, true))).toBe('binding_lost');
  });

  it('a workspace from before markers (its .tmp exists) is adopted', () => {
    const dir = scratch();
    fs.mkdirSync(path.join(dir, '.tmp'));
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: true });
  });
});
