// The workflow bundle's entry: only workflow functions, no I/O.
export { agentTurn } from './agent-turn.js';
