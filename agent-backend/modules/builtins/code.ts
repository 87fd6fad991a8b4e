/**
 * The `code` builtin (issue 41, docs/tools.md "Built-in tools"): a Python 3 program run in the agent's own sandbox
 * through the run's shell (agent-backend/modules/context.ts ShellRunner: shellctl's namespaces, Landlock, uid, seccomp,
 * no network, the shell layer's time and output limits, its queue and its outputs/ attachments). Nothing of its own
 * reaches the host: without the runtime and shell there is no sandbox, and every call is refused in words.
 */
import type { CodeArgs } from '../../../core/protocol/builtin-tools.js';
import type { ShellResult } from '../../workspace/exec.js';
import { shellObservation, type ShellRunner } from '../context.js';
import type { ToolCallContext, ToolOutcome } from '../types.js';

/** Printed (with exit 127) by the wrapper when the sandbox has no python3 on its PATH. */
export const NO_PYTHON_MARKER = 'dify-code: python3 not found';

export const CODE_NEEDS_SHELL =
  'the code tool runs Python in the agent’s sandbox, and this agent has none: turn on its runtime and shell ' +
  '(agent config runtime.enabled and shell.enabled; the studio’s runtime and shell boxes), or do without code';

/** One single-quoted shell word: the program reaches python3 byte for byte, whatever it contains. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The shell command that runs `code`: python3 from the sandbox's PATH, or the marker when there is none. */
export function pythonCommand(code: string): string {
  return `command -v python3 >/dev/null 2>&1 || { echo '${NO_PYTHON_MARKER}' >&2; exit 127; }; exec python3 -c ${shellQuote(code)}`;
}

/** The shell's observation, except that a sandbox without python3 says so. */
export function codeObservation(r: ShellResult): ToolOutcome {
  if (r.status === 'exited' && r.exitCode === 127 && r.stderr.includes(NO_PYTHON_MARKER))
    return {
      kind: 'result',
      result: {
        error: 'python_unavailable',
        message: 'python3 is not installed in this sandbox, so the code tool cannot run here; use the shell tool instead',
      },
      isError: true,
    };
  return shellObservation(r);
}

export function runCode(runner: ShellRunner | undefined, args: CodeArgs, ctx: ToolCallContext): Promise<ToolOutcome> {
  if (!runner) return Promise.resolve({ kind: 'result', result: CODE_NEEDS_SHELL, isError: true });
  return runner.run({ command: pythonCommand(args.code), timeoutMs: args.timeout_ms, observe: codeObservation }, ctx);
}
