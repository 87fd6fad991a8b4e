/**
 * Prompt mention expansion (seed 000 expand_prompt_mentions): the slash-menu tokens `{{#kind.id#}}` /
 * `{{#kind.id.label#}}` and Dify's `[§kind:id[:label]§]` markers become readable text before the prompt
 * reaches the model. Unresolved mentions fall back to their label, then their id; malformed leftovers
 * are removed.
 */
export type MentionResolver = (kind: string, id: string) => string | undefined;

const SLASH = /\{\{#\s*([A-Za-z_][\w-]*)\.([^.#}]+)(?:\.([^#}]*))?\s*#\}\}/g;
const MARKER = /\[§([A-Za-z_][\w-]*):([^:§\]]+)(?::([^§\]]*))?§\]/g;

export function expandPromptMentions(text: string, resolve: MentionResolver = () => undefined): string {
  const sub = (_m: string, kind: string, id: string, label?: string) => resolve(kind, id.trim()) ?? (label?.trim() || id.trim());
  return text
    .replace(SLASH, sub)
    .replace(MARKER, sub)
    .replace(/\{\{#[^}]*#\}\}/g, '')
    .replace(/\[§[^\]]*§\]/g, '');
}
