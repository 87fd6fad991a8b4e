// The workflow bundle's entry: only workflow functions, no I/O.
export { agentTurn } from './agent-turn.js';
export { scheduledTurn } from './scheduled-turn.js';
export { deliverWebhook } from './deliver-webhook.js';
export { conversationQueue } from './conversation-queue.js';
