/**
 * The backend's check of a workspace's identity marker on entry (issue 31, docs/seeds/001 `binding_lost`): the marker's
 * format, reading and writing are core/domain/workspace-marker.ts (the api and the worker write and remove it too); what
 * a missing, foreign or stale marker means for a run — it fails `binding_lost` instead of silently starting empty — is
 * decided here, with the migration of an earlier release's in-tree marker.
 */
import fs from 'node:fs';
import { at } from '../../core/domain/workspace-fs.js';
import {
  inodeOf,
  LEGACY_MARKER_FILE,
  markerPath,
  openWorkspace,
  readLegacyMarker,
  readMarker,
  withDir,
  writeMarker,
  type WorkspaceIdentity,
} from '../../core/domain/workspace-marker.js';
import { RunRefusedError } from '../errors.js';

/** The reason a run fails with when its workspace is gone (activities/classify-failure.ts maps it to the seed's message). */
export const BINDING_LOST = 'binding_lost';

const lost = (id: WorkspaceIdentity, why: string) =>
  new RunRefusedError(null, `workspace ${id.workspaceId} (generation ${id.generation}) is lost: ${why}`, BINDING_LOST);

const sameIdentity = (m: WorkspaceIdentity, id: WorkspaceIdentity) => m.workspaceId === id.workspaceId && m.generation === id.generation;

/**
 * The migration of a workspace from before issue 43: its in-tree `.dify-workspace` checked as earlier releases did
 * (another identity, or not a marker: lost), then the marker written beside the workspaces and the old one removed.
 * Returns whether there was one.
 */
function migrateLegacyMarker(dir: string, wsFd: number, id: WorkspaceIdentity): boolean {
  const legacy = readLegacyMarker(wsFd);
  if (legacy === 'absent') return false;
  if (legacy === 'invalid') throw lost(id, `its ${LEGACY_MARKER_FILE} marker is not a valid workspace marker`);
  if (!sameIdentity(legacy, id))
    throw lost(id, `the directory belongs to workspace ${legacy.workspaceId} (generation ${legacy.generation})`);
  writeMarker(dir, id, wsFd);
  try {
    fs.unlinkSync(at(wsFd, LEGACY_MARKER_FILE));
  } catch {
    // Left behind, it is never read again (the marker beside the workspaces wins).
  }
  return true;
}

/**
 * The check on entry, before the workspace directory is created or touched:
 * - a marker naming another workspace or generation, or not a marker: foreign → binding_lost;
 * - a marker of this identity for this very directory: the binding's own workspace;
 * - a marker of this identity whose directory is missing or another one, and `expectExisting`: lost → binding_lost;
 *   without `expectExisting` (the binding's first turn) it is a stale marker, replaced;
 * - no marker, and a workspace of an earlier release: its in-tree marker migrated (migrateLegacyMarker), or, for one
 *   from before markers (it has the private `.tmp` every earlier turn created), adopted;
 * - no marker, and `expectExisting`: lost → binding_lost;
 * - no marker otherwise: a new workspace; the caller creates it and writes the marker.
 * Returns whether the marker is still to be written (after the directory exists).
 */
export function checkWorkspaceMarker(dir: string, id: WorkspaceIdentity, expectExisting: boolean): { write: boolean } {
  const marker = readMarker(dir);
  if (marker === 'invalid') throw lost(id, `its marker ${markerPath(dir)} is not a valid workspace marker`);
  return withDir(openWorkspace(dir), (ws) => {
    if (marker !== 'absent') {
      if (!sameIdentity(marker, id))
        throw lost(id, `the directory belongs to workspace ${marker.workspaceId} (generation ${marker.generation})`);
      if (ws !== null && marker.directoryInode === inodeOf(ws)) return { write: false };
      if (!expectExisting) return { write: true };
      throw lost(id, ws === null ? 'its directory is missing' : 'its directory was removed and made again since its last turn');
    }
    if (ws !== null && migrateLegacyMarker(dir, ws, id)) return { write: false };
    if (!expectExisting) return { write: true };
    let legacy = false;
    try {
      legacy = ws !== null && fs.lstatSync(at(ws, '.tmp')).isDirectory();
    } catch {
      legacy = false;
    }
    if (!legacy)
      throw lost(id, 'its directory is missing or was emptied since its last turn (is WORKSPACES_DIR the storage its earlier turns used?)');
    return { write: true };
  });
}
