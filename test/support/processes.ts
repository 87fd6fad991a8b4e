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

/** SIGKILLs the stack's worker child process and waits until it is gone (start another with stack.startWorkerChild()). */
export async function killWorkerChild(stack: Stack): Promise<void> {
  const child = stack.workerChild!;
  const dead = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await dead;
}
