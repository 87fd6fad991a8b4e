/** Process helpers for tests that kill things: is a pid still running, and a hard kill of the stack's worker. */
import fs from 'node:fs';
import type { Stack } from '../../stack/start-stack.js';

/** True while `pid` exists and is not a zombie (an exited child its parent has not reaped yet). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Live processes (host pids) whose environment has HOME=`workspace`: what a shell command started in that workspace
 * (shellctl gives every command HOME=its workspace). Pids a command prints are its PID namespace's (issue 27), not
 * the host's, so tests find the tree this way instead.
 */
export function workspaceProcesses(workspace: string): number[] {
  const want = Buffer.from(`\0HOME=${workspace}\0`);
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), fs.readFileSync(`/proc/${entry}/environ`), Buffer.from([0])]);
      if (env.includes(want) && isAlive(Number(entry))) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** SIGKILLs the stack's worker child process and waits until it is gone (start another with stack.startWorkerChild()). */
export async function killWorkerChild(stack: Stack): Promise<void> {
  const child = stack.workerChild!;
  const dead = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await dead;
}
