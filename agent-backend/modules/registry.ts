/**
 * The module registry: layer `type` → module. HTTP input names modules only by these registered
 * names (never an import path). `prompt` and `user_prompt` are convenience names.
 */
import { askHuman } from './ask-human.js';
import { configModule, createRuntimeModule, createShellModule, executionContext, llm, output } from './context.js';
import { createKnowledgeModule } from './knowledge.js';
import { history } from './history.js';
import {
  agentAppUserPrompt,
  agentSoulPrompt,
  promptModule,
  userPromptModule,
  workflowNodeJobPrompt,
  workflowUserPrompt,
} from './prompts.js';
import { createCoreTools, pluginTools, type BuiltinToolDeps } from './tools.js';
import type { AnyModule } from './types.js';
import type { Sandbox } from '../workspace/sandbox.js';
import type { KnowledgeClient } from '../knowledge-client.js';
import type { WorkspaceAuthorizer } from '../workspace-authorizer.js';
import type { WorkspaceStore } from '../workspace/store.js';

export type ModuleRegistry = ReadonlyMap<string, AnyModule>;

/**
 * `sandbox`: the Local runtime; without one (or without its token) runtime/shell are unavailable.
 * `knowledge`: the api's retrieval endpoint; without it the knowledge module is unavailable.
 * `workspaces`: the api's workspace authorization; without it the runtime module is unavailable.
 * `workspaceStore`: where workspaces live between runs (default posix: the shared WORKSPACES_DIR itself).
 * `builtins`: the network and limits of the builtin shelf (default: public addresses only, the api's tool limits).
 */
export function createRegistry(
  extra: AnyModule[] = [],
  opts: {
    sandbox?: Sandbox;
    knowledge?: KnowledgeClient;
    workspaces?: WorkspaceAuthorizer;
    workspaceStore?: WorkspaceStore;
    builtins?: BuiltinToolDeps;
  } = {},
): ModuleRegistry {
  const modules = [
    agentSoulPrompt,
    workflowNodeJobPrompt,
    workflowUserPrompt,
    agentAppUserPrompt,
    executionContext,
    createRuntimeModule(opts.sandbox, opts.workspaces, opts.workspaceStore),
    createShellModule(opts.sandbox),
    configModule,
    history,
    llm,
    pluginTools,
    createCoreTools(opts.builtins),
    createKnowledgeModule(opts.knowledge),
    output,
    askHuman,
    promptModule,
    userPromptModule,
    ...extra,
  ];
  return new Map(modules.map((m) => [m.name, m]));
}
