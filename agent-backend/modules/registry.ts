/**
 * The module registry: layer `type` → module. HTTP input names modules only by these registered
 * names (never an import path). `prompt` and `user_prompt` are convenience names.
 */
import { askHuman } from './ask-human.js';
import { configModule, executionContext, knowledge, llm, output, runtime, shell } from './context.js';
import { history } from './history.js';
import {
  agentAppUserPrompt,
  agentSoulPrompt,
  promptModule,
  userPromptModule,
  workflowNodeJobPrompt,
  workflowUserPrompt,
} from './prompts.js';
import { coreTools, pluginTools } from './tools.js';
import type { AnyModule } from './types.js';

export type ModuleRegistry = ReadonlyMap<string, AnyModule>;

export function createRegistry(extra: AnyModule[] = []): ModuleRegistry {
  const modules = [
    agentSoulPrompt,
    workflowNodeJobPrompt,
    workflowUserPrompt,
    agentAppUserPrompt,
    executionContext,
    runtime,
    shell,
    configModule,
    history,
    llm,
    pluginTools,
    coreTools,
    knowledge,
    output,
    askHuman,
    promptModule,
    userPromptModule,
    ...extra,
  ];
  return new Map(modules.map((m) => [m.name, m]));
}
