/**
 * What a prompt mention means (docs/seeds/000 `expand_prompt_mentions`, issue 31): a resolver that knows the
 * composition the prompt goes into, so every `{{#kind.id#}}` / `[§kind:id§]` becomes something the model can use:
 *
 * - `tool.<name>`: the exact tool name the model is offered — a builtin of `tools.core`, a provider tool as
 *   `<provider>__<tool>` (core/protocol/tool-names.ts), `shell` (runtime + shell), `ask_human`, `knowledge_search`;
 * - `dataset.<id>`: the dataset's name, for a dataset of the knowledge layer (knowledge enabled, the id listed);
 * - `sys.<name>`: the turn's value (`query`, `user_id`, `conversation_id`, `app_id`, `message_id`);
 * - `inputs.<name>`: the turn's input of that name (empty when the request did not give it).
 *
 * Anything else is unknown: an `invalid_agent_config` issue at save naming the mention (`mentionIssues`). At turn
 * time (a config saved before these checks) an unknown mention still falls back to its label, then its id.
 * Everything here runs the linear scanner of core/domain/mentions.ts; nothing is a regex over the prompt.
 */
import { expandPromptMentions, type MentionResolver } from './mentions.js';
import type { AgentSoulConfig } from './soul.js';
import type { SoulIssue } from './soul-issues.js';
import { qualifiedToolName } from '../protocol/tool-names.js';

export const SYS_VARIABLES = ['query', 'user_id', 'conversation_id', 'app_id', 'message_id'] as const;
export type SysVariable = (typeof SYS_VARIABLES)[number];

/** The names the model is offered for this soul, as buildComposition lays the layers out. */
export function offeredToolNames(soul: AgentSoulConfig): string[] {
  return [
    ...soul.tools.core,
    ...soul.tools.plugin.map((t) => qualifiedToolName(t.provider, t.name)),
    ...(soul.runtime.enabled && soul.shell.enabled ? ['shell'] : []),
    ...(soul.knowledge.enabled && soul.knowledge.search_tool ? ['knowledge_search'] : []),
    ...(soul.ask_human.enabled ? ['ask_human'] : []),
  ];
}

/** The datasets the knowledge layer knows: the configured ids (only while knowledge is enabled). */
export function knownDatasetIds(soul: AgentSoulConfig): string[] {
  return soul.knowledge.enabled ? soul.knowledge.dataset_ids : [];
}

export interface MentionValues {
  /** Dataset id → name (the knowledge layer's datasets). A missing name falls back to the mention's label. */
  datasetNames?: ReadonlyMap<string, string>;
  sys?: Partial<Record<SysVariable, string>>;
  inputs?: Readonly<Record<string, unknown>>;
}

const inputText = (v: unknown): string => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));

/** Why a mention means nothing in this soul, or null when the resolver understands it. */
function problem(soul: AgentSoulConfig, tools: ReadonlySet<string>, kind: string, id: string): string | null {
  switch (kind) {
    case 'tool':
      return tools.has(id)
        ? null
        : `the tool ${id} is not offered to the model by this config (offered: ${[...tools].join(', ') || 'none'})`;
    case 'dataset':
      return knownDatasetIds(soul).includes(id) ? null : `the dataset ${id} is not a dataset of the knowledge layer`;
    case 'sys':
      return (SYS_VARIABLES as readonly string[]).includes(id) ? null : `sys variables are ${SYS_VARIABLES.join(', ')}`;
    case 'inputs':
      return id ? null : 'an inputs mention needs a variable name';
    default:
      return 'mentions are tool, dataset, sys or inputs';
  }
}

/** The resolver of a turn: every understood mention becomes its value; unknown ones stay unresolved (label/id). */
export function compositionResolver(soul: AgentSoulConfig, values: MentionValues = {}): MentionResolver {
  const tools = new Set(offeredToolNames(soul));
  return (kind, id) => {
    if (problem(soul, tools, kind, id)) return undefined;
    switch (kind) {
      case 'tool':
        return id;
      case 'dataset':
        return values.datasetNames?.get(id);
      case 'sys':
        return values.sys?.[id as SysVariable] ?? '';
      case 'inputs':
        return inputText(values.inputs?.[id]);
      default:
        return undefined;
    }
  };
}

/** The prompt as the model gets it. */
export function resolvePromptMentions(soul: AgentSoulConfig, values: MentionValues = {}): string {
  return expandPromptMentions(soul.prompt.system_prompt, compositionResolver(soul, values));
}

/** One issue per distinct unknown mention (at save: docs/PROTOCOL.md "Error codes": invalid_agent_config). */
export function mentionIssues(soul: AgentSoulConfig): SoulIssue[] {
  const tools = new Set(offeredToolNames(soul));
  const issues: SoulIssue[] = [];
  const seen = new Set<string>();
  expandPromptMentions(soul.prompt.system_prompt, (kind, id) => {
    const key = `${kind}.${id}`;
    if (seen.has(key)) return undefined;
    seen.add(key);
    const why = problem(soul, tools, kind, id);
    if (why) issues.push({ path: ['prompt', 'system_prompt'], message: `the mention {{#${key}#}} is unknown: ${why}` });
    return undefined;
  });
  return issues;
}
