/**
 * Names and payloads shared by the workflow and its clients (api), so they cannot drift.
 * Payloads are ids and small summaries only: nothing big ever enters workflow history.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';

// The workflow's name, input and id live with the activities' contract (core/protocol/workflow-contract.ts).
export { AGENT_TURN_WORKFLOW, workflowIdForMessage, type AgentTurnInput, type InvokeFrom } from '../core/protocol/workflow-contract.js';

export type TurnPhase =
  | 'resolving_config'
  | 'input_guards'
  | 'loading_binding'
  | 'building_request'
  | 'running_agent'
  | 'waiting_for_human'
  | 'finalizing'
  | 'completed'
  | 'failed'
  | 'stopped';

export interface TurnState {
  phase: TurnPhase;
  messageId: string;
  pendingFormId: string | null;
  pendingFormToken: string | null;
}

export interface AgentTurnResult {
  status: 'succeeded' | 'failed' | 'stopped' | 'answered_by_guard' | 'paused';
  messageId: string;
  errorCode?: string;
}

export interface FormSubmittedSignal {
  formId: string;
  /** The new message that carries the continuation. */
  resumeMessageId: string;
}

export const formSubmittedSignal = defineSignal<[FormSubmittedSignal]>('formSubmitted');
export const turnStateQuery = defineQuery<TurnState>('turnState');
