/**
 * ask_human forms (docs/PROTOCOL.md §5): the form a deferred tool call becomes, validation of a submission, and the
 * deferred tool result a resumed run receives.
 */
import crypto from 'node:crypto';
import { z } from 'zod';
import type { DeferredToolResult } from '../protocol/run.js';
import { handTurnLock } from './turn/turn-lock.js';

const FieldName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/);
export const FormField = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('paragraph'),
    name: FieldName,
    label: z.string().max(200).default(''),
    required: z.boolean().default(false),
    placeholder: z.string().max(500).optional(),
    default: z.string().max(20_000).optional(),
  }),
  z.object({
    type: z.literal('select'),
    name: FieldName,
    label: z.string().max(200).default(''),
    required: z.boolean().default(false),
    options: z
      .array(z.object({ value: z.string().max(200), label: z.string().max(200) }))
      .min(1)
      .max(50),
    default: z.string().max(200).optional(),
  }),
]);
export type FormField = z.infer<typeof FormField>;

export const FormAction = z.object({
  id: z.string().min(1).max(64),
  label: z.string().min(1).max(100),
  style: z.enum(['default', 'primary', 'destructive']).default('default'),
});
export type FormAction = z.infer<typeof FormAction>;

/** ask_human tool args with the hard caps (the backend enforces the softer defaults). */
export const AskHumanArgs = z.object({
  title: z.string().max(200).optional(),
  question: z.string().min(1).max(4000),
  markdown: z.string().max(20_000).optional(),
  fields: z.array(FormField).max(16).default([]),
  actions: z.array(FormAction).max(8).default([]),
  urgency: z.enum(['normal', 'high']).default('normal'),
});
export type AskHumanArgs = z.infer<typeof AskHumanArgs>;

export const DEFAULT_ACTIONS: FormAction[] = [{ id: 'submit', label: 'Submit', style: 'primary' }];

export function newFormToken(): string {
  return crypto.randomBytes(24).toString('base64url');
}

/** Parses the deferred call's args into a renderable form (falls back to a plain question). */
export function formFromArgs(args: Record<string, unknown>): AskHumanArgs & { actions: FormAction[] } {
  const parsed = AskHumanArgs.safeParse(args);
  const a = parsed.success
    ? parsed.data
    : AskHumanArgs.parse({ question: String(args.question ?? 'The agent needs your input.').slice(0, 4000) });
  return { ...a, actions: a.actions.length ? a.actions : DEFAULT_ACTIONS };
}

export class SubmissionError extends Error {}

/** Validates `{inputs, action}` against the form; returns clean values or throws SubmissionError naming the field. */
export function validateSubmission(
  fields: FormField[],
  actions: FormAction[],
  inputs: Record<string, unknown>,
  actionId: string,
): { values: Record<string, string>; action: FormAction } {
  const action = actions.find((a) => a.id === actionId);
  if (!action) throw new SubmissionError(`action: must be one of ${actions.map((a) => a.id).join(', ')}`);
  const known = new Set(fields.map((f) => f.name));
  for (const k of Object.keys(inputs)) if (!known.has(k)) throw new SubmissionError(`inputs.${k}: is not a field of this form`);
  const values: Record<string, string> = {};
  for (const f of fields) {
    const raw = inputs[f.name];
    if (raw === undefined || raw === null || raw === '') {
      if (f.required) throw new SubmissionError(`inputs.${f.name}: is required`);
      if (f.default !== undefined) values[f.name] = f.default;
      continue;
    }
    if (typeof raw !== 'string') throw new SubmissionError(`inputs.${f.name}: must be a string`);
    if (f.type === 'paragraph' && raw.length > 20_000) throw new SubmissionError(`inputs.${f.name}: is longer than 20000 characters`);
    if (f.type === 'select' && !f.options.some((o) => o.value === raw)) {
      throw new SubmissionError(`inputs.${f.name}: must be one of ${f.options.map((o) => o.value).join(', ')}`);
    }
    values[f.name] = raw;
  }
  return { values, action };
}

/** What the human answered, as text the model reads. */
export function renderSubmission(fields: FormField[], values: Record<string, string>, action: FormAction): string {
  const lines = fields.filter((f) => values[f.name] !== undefined).map((f) => `**${f.label || f.name}**: ${values[f.name]}`);
  lines.push(`Action: ${action.label}`);
  return lines.join('\n\n');
}

export function deferredResultFromForm(form: {
  status: string;
  fields: unknown;
  actions: unknown;
  submission: unknown;
  submitted_action: string | null;
}): DeferredToolResult {
  if (form.status === 'submitted') {
    const fields = form.fields as FormField[];
    const actions = form.actions as FormAction[];
    const values = (form.submission ?? {}) as Record<string, string>;
    const action = actions.find((a) => a.id === form.submitted_action) ?? actions[0] ?? DEFAULT_ACTIONS[0]!;
    return {
      status: 'submitted',
      action: { id: action.id, label: action.label },
      values,
      rendered_content: renderSubmission(fields, values, action),
    };
  }
  if (form.status === 'expired') return { status: 'timeout' };
  return { status: 'unavailable' };
}

/** What a continuation inherits of its paused message's metadata: the scope only (not usage, failures or guards). */
export function resumeMetadata(metadata: unknown): { draft_type?: string } {
  const draftType = (metadata as { draft_type?: unknown } | null)?.draft_type;
  return typeof draftType === 'string' ? { draft_type: draftType } : {};
}

type ResumeTx = {
  message: {
    findUniqueOrThrow: (a: { where: { id: string } }) => Promise<{
      id: string;
      tenant_id: string;
      app_id: string;
      conversation_id: string;
      end_user_id: string | null;
      account_id: string | null;
      invoke_from: string;
      query: string;
      inputs: unknown;
      workflow_id: string;
      agent_config_version_id: string | null;
      metadata: unknown;
    }>;
    upsert: (a: object) => Promise<unknown>;
    updateMany: (a: object) => Promise<{ count: number }>;
  };
  humanInputForm: { update: (a: object) => Promise<unknown> };
  conversation: { updateMany: (a: object) => Promise<{ count: number }> };
};

/**
 * The continuation of a paused turn: a new Message re-sending the paused turn's query (so the composition
 * still matches the snapshot), in the same workflow; the conversation's turn lock moves to it. The paused
 * message is a finished turn from now on (its answer, the question, stands): `succeeded`, not `paused`.
 * A debugger turn's draft type goes with it (docs/seeds/000 `_resolve_resume_draft`): a BUILD_DRAFT turn
 * resumes on the same build draft, whose binding holds the snapshot and the pending call.
 */
export async function createResumeMessage(tx: ResumeTx, pausedMessageId: string, formId: string, resumeMessageId: string): Promise<void> {
  const paused = await tx.message.findUniqueOrThrow({ where: { id: pausedMessageId } });
  await tx.message.upsert({
    where: { id: resumeMessageId },
    update: {},
    create: {
      id: resumeMessageId,
      tenant_id: paused.tenant_id,
      app_id: paused.app_id,
      conversation_id: paused.conversation_id,
      end_user_id: paused.end_user_id,
      account_id: paused.account_id,
      invoke_from: paused.invoke_from,
      query: paused.query,
      inputs: paused.inputs ?? {},
      workflow_id: paused.workflow_id,
      agent_config_version_id: paused.agent_config_version_id,
      metadata: resumeMetadata(paused.metadata),
      resumed_from_message_id: paused.id,
      // It follows the paused message in its thread (core/domain/message-thread.ts).
      parent_message_id: paused.id,
    },
  });
  await tx.message.updateMany({ where: { id: paused.id, status: 'paused' }, data: { status: 'succeeded' } });
  await tx.humanInputForm.update({ where: { id: formId }, data: { resume_message_id: resumeMessageId } });
  await handTurnLock(tx, paused.conversation_id, paused.id, resumeMessageId);
}
