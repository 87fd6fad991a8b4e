/**
 * The workspace identity marker (issue 31, core/domain/workspace-marker.ts; checked on entry by
 * agent-backend/workspace/marker.ts): new, own, lost, foreign, replaced, and the
 * two layouts of earlier releases (an in-tree `.dify-workspace`, none at all) — kept valid and moved out of the tree.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunRefusedError } from '../../agent-backend/errors.js';
import { checkWorkspaceMarker } from '../../agent-backend/workspace/marker.js';
import { LEGACY_MARKER_FILE, markerPath, readMarker, removeMarker, writeMarker } from '../../core/domain/workspace-marker.js';

const id = { workspaceId: '11111111-1111-4111-8111-111111111111', generation: 1 };
const other = '22222222-2222-4222-8222-222222222222';
/** A WORKSPACES_DIR of its own; workspaces are `<it>/<id>`. */
const scratch = () => fs.mkdtempSync(path.join(os.tmpdir(), 'marker-'));
const dirId = (dir: string) => {
  const st = fs.statSync(dir, { bigint: true });
  return `${st.ino}:${st.birthtimeNs}`;
};
const wsIn = (root: string, name = id.workspaceId) => path.join(root, name);

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
  it('a new workspace gets a marker beside the workspaces, naming its directory, that later entries accept', () => {
    const dir = wsIn(scratch());
    expect(checkWorkspaceMarker(dir, id, false)).toEqual({ write: true });
    fs.mkdirSync(dir);
    writeMarker(dir, id);
    expect(markerPath(dir)).toBe(path.join(path.dirname(dir), '.markers', id.workspaceId));
    expect(readMarker(dir)).toEqual({ ...id, directoryInode: dirId(dir) });
    expect(fs.existsSync(path.join(dir, LEGACY_MARKER_FILE))).toBe(false);
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
  });

  it('what the agent writes in its tree changes nothing: a forged or deleted .dify-workspace is not read', () => {
    const dir = wsIn(scratch());
    fs.mkdirSync(dir);
    writeMarker(dir, id);
    fs.writeFileSync(path.join(dir, LEGACY_MARKER_FILE), JSON.stringify({ workspace_id: other, generation: 1 }));
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
    fs.rmSync(path.join(dir, LEGACY_MARKER_FILE));
    fs.rmSync(path.join(dir, '.tmp'), { recursive: true, force: true });
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
  });

  it('expected but missing, foreign, another generation, not a marker, or a directory made again: binding_lost', () => {
    const root = scratch();
    expect(lostReason(() => checkWorkspaceMarker(wsIn(root), id, true))).toBe('binding_lost');
    // Foreign: even on a first entry.
    const foreign = wsIn(root, other);
    fs.mkdirSync(foreign);
    writeMarker(foreign, { workspaceId: id.workspaceId, generation: 1 });
    expect(lostReason(() => checkWorkspaceMarker(foreign, { workspaceId: other, generation: 1 }, false))).toBe('binding_lost');
    const dir = wsIn(root);
    fs.mkdirSync(dir);
    writeMarker(dir, { ...id, generation: 2 });
    expect(lostReason(() => checkWorkspaceMarker(dir, id, true))).toBe('binding_lost');
    fs.writeFileSync(markerPath(dir), 'not json');
    expect(readMarker(dir)).toBe('invalid');
    expect(lostReason(() => checkWorkspaceMarker(dir, id, true))).toBe('binding_lost');
    // Removed and recreated by something else (files placed for the turn) but never entered: the marker names the old one.
    writeMarker(dir, id);
    fs.rmSync(dir, { recursive: true });
    fs.mkdirSync(path.join(dir, 'uploads'), { recursive: true });
    expect(lostReason(() => checkWorkspaceMarker(dir, id, true))).toBe('binding_lost');
    // Its directory gone.
    fs.rmSync(dir, { recursive: true });
    expect(lostReason(() => checkWorkspaceMarker(dir, id, true))).toBe('binding_lost');
    // A first entry replaces such a stale marker; removeMarker removes it.
    expect(checkWorkspaceMarker(dir, id, false)).toEqual({ write: true });
    removeMarker(dir);
    expect(readMarker(dir)).toBe('absent');
  });

  it('a workspace of the previous release keeps its binding: the in-tree marker is checked, moved out and removed', () => {
    const dir = wsIn(scratch());
    fs.mkdirSync(path.join(dir, '.tmp'), { recursive: true });
    fs.writeFileSync(path.join(dir, LEGACY_MARKER_FILE), `${JSON.stringify({ workspace_id: id.workspaceId, generation: 1 })}\n`);
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
    expect(fs.existsSync(path.join(dir, LEGACY_MARKER_FILE))).toBe(false);
    expect(readMarker(dir)).toEqual({ ...id, directoryInode: dirId(dir) });
    // From now on the tree's copy means nothing.
    fs.writeFileSync(path.join(dir, LEGACY_MARKER_FILE), JSON.stringify({ workspace_id: other, generation: 1 }));
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: false });
  });

  it("the previous release's in-tree marker of another workspace, or a link, is still binding_lost", () => {
    const root = scratch();
    const foreign = wsIn(root);
    fs.mkdirSync(foreign);
    fs.writeFileSync(path.join(foreign, LEGACY_MARKER_FILE), JSON.stringify({ workspace_id: other, generation: 1 }));
    expect(lostReason(() => checkWorkspaceMarker(foreign, id, true))).toBe('binding_lost');
    expect(readMarker(foreign)).toBe('absent');
    const linked = wsIn(root, other);
    fs.mkdirSync(linked);
    fs.symlinkSync(path.join(foreign, LEGACY_MARKER_FILE), path.join(linked, LEGACY_MARKER_FILE));
    expect(lostReason(() => checkWorkspaceMarker(linked, { workspaceId: other, generation: 1 }, true))).toBe('binding_lost');
  });

  it('a workspace from before markers (its .tmp exists) is adopted', () => {
    const dir = wsIn(scratch());
    fs.mkdirSync(path.join(dir, '.tmp'), { recursive: true });
    expect(checkWorkspaceMarker(dir, id, true)).toEqual({ write: true });
  });
});
