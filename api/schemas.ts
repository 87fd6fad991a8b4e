/** Request schemas of the public service API (PROTOCOL §1, Dify's field names). */
import { z } from 'zod';

export const Uuid = z.string().uuid();
export const UserId = z.string().trim().min(1, 'is required').max(255);

export const ChatFile = z.object({
  type: z.enum(['image', 'document', 'audio', 'video', 'custom']),
  transfer_method: z.enum(['local_file', 'remote_url']),
  upload_file_id: z.string().optional(),
  url: z.string().url().optional(),
});

export const ChatRequest = z.object({
  inputs: z.record(z.string(), z.unknown()).default({}),
  query: z.string().min(1, 'is required').max(100_000),
  user: UserId,
  response_mode: z.enum(['streaming', 'blocking']).default('streaming'),
  conversation_id: z.union([Uuid, z.literal('')]).optional(),
  files: z.array(ChatFile).max(20).default([]),
  auto_generate_name: z.boolean().default(true),
});
export type ChatRequest = z.output<typeof ChatRequest>;

export const StopRequest = z.object({ user: UserId });

export const MessagesQuery = z.object({
  conversation_id: Uuid,
  user: UserId,
  first_id: z.union([Uuid, z.literal('')]).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export const ConversationsQuery = z.object({
  user: UserId,
  last_id: z.union([Uuid, z.literal('')]).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
