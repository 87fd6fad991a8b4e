/**
 * Issue 27, the escape suite through the real stack: what a command may do to the host's kernel state. Each test is
 * a real turn (support.ts) whose probe prints ESCAPED on success; each asserts the refusal and that nothing changed
 * outside the workspace (the host's hostname, its addresses, no device node). Probes are harmless should one get
 * through (a run with SHELL_ISOLATION=off renamed the host and took its loopback down): same-name sethostname, an
 * address removed again at once, a mount undone at once.
 * Depends on the new shellctl (sandbox/: namespaces, uid drop, empty capability sets, seccomp).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceUid } from '../../../core/protocol/workspace-uid.js';
import { pythonProbe, refusalOf, startSandboxStack, type SandboxStack } from './support.js';

let s: SandboxStack;
beforeAll(async () => {
  s = await startSandboxStack('sandbox_privileges');
}, 300_000);
afterAll(async () => s?.stack.stop());

const USER = 'priv';
let conversationId: string | undefined;
/** All probes of this file in one conversation (one workspace). */
async function run(command: string) {
  const t = await s.sh(command, USER, { conversationId });
  conversationId = t.conversationId;
  expect(t.end.event, JSON.stringify(t.end.data)).toBe('message_end');
  return t;
}

const PROBE_ADDRESS = '10.213.7.9';
const hostAddresses = () =>
  Object.values(os.networkInterfaces())
    .flat()
    .map((a) => a!.address);

describe('privileges of a sandboxed command', () => {
  it('/proc/self/status: a uid other than 0 (>= 200000), every capability set empty, no_new_privs and a seccomp filter', async () => {
    const t = await run('grep -E "^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status');
    expect(t.answer).toContain('The command exited with code 0.');
    const field = (name: string) => new RegExp(`^${name}:\\s*(.+)$`, 'm').exec(t.answer)?.[1]?.trim().split(/\s+/);
    const uids = field('Uid')!.map(Number);
    expect(uids).toHaveLength(4);
    for (const uid of uids) {
      expect(uid).not.toBe(0);
      expect(uid).toBeGreaterThanOrEqual(200_000);
    }
    // The workspace's own uid (core/protocol/workspace-uid.ts), the same for all four ids (no saved root to return to).
    const { workspaceId } = await s.workspaceOf(conversationId!);
    const own = workspaceUid(workspaceId, { base: s.stack.config.SHELL_UID_BASE, range: s.stack.config.SHELL_UID_RANGE });
    expect(uids).toEqual([own.uid, own.uid, own.uid, own.uid]);
    expect(field('Gid')!.map(Number)).toEqual([own.gid, own.gid, own.gid, own.gid]);
    for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) expect(field(cap), cap).toEqual(['0000000000000000']);
    expect(field('NoNewPrivs')).toEqual(['1']);
    expect(field('Seccomp')).toEqual(['2']);
  });

  it('mknod of a device node is refused (EPERM) and no node exists afterwards', async () => {
    const t = await run(
      `${pythonProbe(`probe("mknod", lambda: os.mknod("devnull-copy", 0o20666, os.makedev(1, 3)))\nprobe("mknod-block", lambda: os.mknod("sda-copy", 0o60666, os.makedev(8, 0)))`)}; ls -l devnull-copy sda-copy`,
    );
    expect(refusalOf(t.answer, 'mknod').errno).toBe('EPERM');
    expect(refusalOf(t.answer, 'mknod-block').errno).toBe('EPERM');
    const { dir } = await s.workspaceOf(conversationId!);
    expect(fs.existsSync(path.join(dir, 'devnull-copy'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'sda-copy'))).toBe(false);
  });

  it('sethostname is refused (EPERM), the sandbox has its own UTS name, the host keeps its hostname', async () => {
    const before = os.hostname();
    // Set to the name it already has: refused all the same (CAP_SYS_ADMIN), and harmless should it ever work (a
    // run of this suite without the sandbox did rename the host).
    const t = await run(`hostname; ${pythonProbe('probe("sethostname", lambda: socket.sethostname(socket.gethostname()))')}`);
    expect(refusalOf(t.answer, 'sethostname').errno).toBe('EPERM');
    expect(t.answer).toMatch(/^sandbox$/m);
    expect(before).not.toBe('sandbox');
    expect(os.hostname()).toBe(before);
    expect(fs.readFileSync('/proc/sys/kernel/hostname', 'utf8').trim()).toBe(before);
  });

  it('packet and raw sockets are refused (EPERM/EACCES)', async () => {
    const t = await run(
      pythonProbe(
        [
          'probe("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))',
          'probe("packet-dgram", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3)))',
          'probe("raw-icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))',
          'probe("raw-tcp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP))',
        ].join('\n'),
      ),
    );
    for (const what of ['packet', 'packet-dgram', 'raw-icmp', 'raw-tcp6'])
      expect(['EPERM', 'EACCES']).toContain(refusalOf(t.answer, what).errno);
  });

  it('netlink sockets are refused, `ip addr add` fails, and the host gains no address', async () => {
    const before = hostAddresses();
    const t = await run(
      `${pythonProbe(
        [
          'probe("netlink-route", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))',
          'probe("netlink-audit", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9))',
        ].join('\n'),
      )}; /usr/sbin/ip addr add ${PROBE_ADDRESS}/32 dev lo && { echo ESCAPED ip-addr-add; /usr/sbin/ip addr del ${PROBE_ADDRESS}/32 dev lo; false; }; echo "ip exit $?"`,
    ).finally(() => {
      // Should it ever get through, the host does not keep the address.
      if (hostAddresses().includes(PROBE_ADDRESS)) execFileSync('/usr/sbin/ip', ['addr', 'del', `${PROBE_ADDRESS}/32`, 'dev', 'lo']);
    });
    for (const what of ['netlink-route', 'netlink-audit']) expect(['EPERM', 'EACCES']).toContain(refusalOf(t.answer, what).errno);
    expect(t.answer).not.toContain('ESCAPED');
    expect(t.answer).toMatch(/ip exit [1-9]/);
    const after = hostAddresses();
    expect(after).not.toContain(PROBE_ADDRESS);
    expect(after.sort()).toEqual(before.sort());
  });

  it('mount is refused (EPERM) and the workspace is not covered by a new filesystem', async () => {
    const t = await run(
      `${pythonProbe(
        [
          'import ctypes',
          'libc = ctypes.CDLL(None, use_errno=True)',
          'def sys_ok(r):',
          '    if r != 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))',
          '    return r',
          // Unmounted at once should it ever work (without a mount namespace it would cover the host's directory).
          'def mount_then_undo():',
          '    sys_ok(libc.mount(b"none", os.getcwd().encode(), b"tmpfs", 0, None))',
          '    libc.umount2(os.getcwd().encode(), 2)',
          '    return "mounted"',
          'probe("mount-tmpfs", mount_then_undo)',
        ].join('\n'),
      )}; touch still-here; ls`,
    );
    expect(['EPERM', 'EACCES']).toContain(refusalOf(t.answer, 'mount-tmpfs').errno);
    const { dir } = await s.workspaceOf(conversationId!);
    expect(fs.existsSync(path.join(dir, 'still-here'))).toBe(true);
  });

  it('only the command’s own processes are visible (a PID namespace): no api, backend or PostgreSQL process', async () => {
    const t = await run('ls /proc | grep -E "^[0-9]+$" | wc -l; cat /proc/1/cmdline | tr "\\0" " "; echo');
    expect(t.answer).toContain('The command exited with code 0.');
    const count = Number(/stdout:\n(\d+)/.exec(t.answer)?.[1]);
    expect(count).toBeGreaterThan(0);
    expect(count).toBeLessThan(10);
    expect(t.answer).not.toMatch(/postgres|node|temporal/);
  });
});
