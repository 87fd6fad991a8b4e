/**
 * A dataset's chunk settings (issue 42, Dify's "segment settings"): the most characters of a chunk, the overlap of
 * two neighbours and its own separators, stored on the dataset (`chunk_settings`, null = the chunker's defaults) and
 * used for every document indexed after they were set (a document's bytes are not kept once it is indexed).
 */
import { z } from 'zod';
import { CHUNK_MAX_CHARS, CHUNK_OVERLAP_CHARS, type ChunkOptions } from './chunk.js';

export const ChunkSettings = z
  .object({
    max_chars: z.number().int().min(100).max(4000).default(CHUNK_MAX_CHARS),
    overlap_chars: z.number().int().min(0).max(1000).default(CHUNK_OVERLAP_CHARS),
    /** Cut at every one of these first (e.g. "\n---\n"); none: the defaults only. */
    separators: z.array(z.string().min(1).max(20)).max(10).default([]),
  })
  .strict()
  .refine((s) => s.overlap_chars <= s.max_chars / 2, {
    message: 'overlap_chars may be at most half of max_chars',
    path: ['overlap_chars'],
  });
export type ChunkSettings = z.output<typeof ChunkSettings>;

/** The settings a dataset row holds (null or unreadable: the defaults) as the chunker's options. */
export function chunkOptions(stored: unknown): ChunkOptions {
  const s = stored == null ? null : ChunkSettings.safeParse(stored);
  if (!s?.success) return {};
  return { maxChars: s.data.max_chars, overlapChars: s.data.overlap_chars, separators: s.data.separators };
}

/** What the api shows: the stored settings or the defaults. */
export function chunkSettingsJson(stored: unknown): ChunkSettings {
  const s = stored == null ? null : ChunkSettings.safeParse(stored);
  return s?.success ? s.data : { max_chars: CHUNK_MAX_CHARS, overlap_chars: CHUNK_OVERLAP_CHARS, separators: [] };
}
