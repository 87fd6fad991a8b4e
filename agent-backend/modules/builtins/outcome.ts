/**
 * What a builtin tool returns: its result for the model, or (`isError`) a message saying what went wrong and, where
 * the model can act on it, what to do instead. The agent backend's core_tools layer turns it into an observation.
 */
export interface BuiltinOutcome<T = unknown> {
  isError: boolean;
  result: T | string;
}
