/**
 * One naming scheme for every tool the model sees (issue 14 §5, docs/tools.md):
 *
 * - Builtin tools keep bare names: the core tools, `knowledge_search`, `shell`, `ask_human`. They are reserved.
 * - Tools of a registered provider (API tools from an OpenAPI document, MCP tools) are offered as
 *   `<provider>__<tool>`: the provider's name (lowercase letters, digits, single `_`), two underscores,
 *   the tool's own name (letters, digits, `_`, `-`). At most 64 characters, which every model API accepts.
 * - A qualified name contains `__`, a builtin never does: the two families cannot clash. Names are unique
 *   in a composition; configs that break any of this are refused when saved and again before a turn.
 */
import { z } from 'zod';

/** The builtin shelf (core/domain/tools/builtin/shelf.ts, docs/tools.md "Built-in tools"), chosen in `tools.core`. */
export const BUILTIN_TOOL_NAMES = [
  'current_time',
  'calculator',
  'scratchpad_set',
  'scratchpad_get',
  'http_request',
  'json_query',
  'text',
  'code',
] as const;
export type BuiltinToolName = (typeof BUILTIN_TOOL_NAMES)[number];

/** Tools that modules other than core_tools offer under a bare name. */
export const MODULE_TOOL_NAMES = ['knowledge_search', 'shell', 'ask_human'] as const;

export const RESERVED_TOOL_NAMES: ReadonlySet<string> = new Set<string>([...BUILTIN_TOOL_NAMES, ...MODULE_TOOL_NAMES]);

/** The longest name model APIs accept for a function tool. */
export const MAX_TOOL_NAME_LENGTH = 64;
export const QUALIFIER = '__';

export const ProviderName = z
  .string()
  .regex(/^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/, 'provider names are lowercase letters and digits, words joined by a single _')
  .max(32);
export const ToolName = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/, 'tool names may contain letters, digits, _ and - only')
  .max(MAX_TOOL_NAME_LENGTH);

export function qualifiedToolName(provider: string, tool: string): string {
  return `${provider}${QUALIFIER}${tool}`;
}

/** A model-facing tool name as builtin/provider tools must look (any family). */
export const ModelToolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'tool names are 1–64 letters, digits, _ or -');

/**
 * Why a tool of `provider` named `tool` cannot be offered, or null. Checks the qualified name's length
 * (the parts are checked by their schemas).
 */
export function qualifiedNameProblem(provider: string, tool: string): string | null {
  const q = qualifiedToolName(provider, tool);
  if (q.length > MAX_TOOL_NAME_LENGTH) return `the tool name ${q} is longer than ${MAX_TOOL_NAME_LENGTH} characters`;
  return null;
}
