/**
 * Test hosts on one machine (issue 44 item 2): network namespaces joined by veth pairs to a bridge the run creates,
 * each with an address of 10.244.<net>.0/24 — a range that exists only inside this machine, between namespaces this
 * run made (shared/design/ENVIRONMENT.md "Containers and hosts": traffic never leaves them). Everything is named with
 * the run's own tag and removed by name at the end: namespaces, the bridge and the veths (a veth's host end goes with
 * its namespace's end).
 */
import { execFileSync, spawnSync } from 'node:child_process';

export interface Host {
  name: string;
  /** The namespace (`ip netns exec <ns> …`). */
  ns: string;
  ip: string;
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Whether this process can make namespaces (root with iproute2). */
export function netnsAvailable(): string | null {
  if (process.getuid?.() !== 0) return 'the multi-host run needs root (ip netns add)';
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return r.status === 0 ? null : `ip netns does not work here: ${r.stderr || r.error?.message}`;
}

export class HostNetwork {
  readonly hosts = new Map<string, Host>();
  private readonly bridge: string;
  private bridgeUp = false;

  /** `tag`: a short run-unique name part (≤ 6 chars: interface names are at most 15). `net`: the third octet. */
  constructor(
    private readonly tag: string,
    private readonly net: number,
  ) {
    if (!/^[a-z0-9]{1,6}$/.test(tag)) throw new Error(`tag must be 1-6 lowercase letters or digits: ${tag}`);
    this.bridge = `hb${tag}`;
  }

  /** The bridge's own address: the host side, for tools that run outside the namespaces. */
  get bridgeIp(): string {
    return `10.244.${this.net}.1`;
  }

  private ensureBridge(): void {
    if (this.bridgeUp) return;
    ip('link', 'add', this.bridge, 'type', 'bridge');
    ip('addr', 'add', `${this.bridgeIp}/24`, 'dev', this.bridge);
    ip('link', 'set', this.bridge, 'up');
    this.bridgeUp = true;
  }

  /** A namespace `<tag>-<name>` with loopback up and one veth on the bridge at 10.244.<net>.<n>. */
  add(name: string): Host {
    this.ensureBridge();
    const n = this.hosts.size + 2;
    const ns = `h${this.tag}-${name}`;
    const inHost = `v${this.tag}${n}`;
    const inNs = `e${this.tag}${n}`;
    ip('netns', 'add', ns);
    const host: Host = { name, ns, ip: `10.244.${this.net}.${n}` };
    this.hosts.set(name, host);
    ip('link', 'add', inHost, 'type', 'veth', 'peer', 'name', inNs);
    ip('link', 'set', inNs, 'netns', ns);
    ip('link', 'set', inHost, 'master', this.bridge);
    ip('link', 'set', inHost, 'up');
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    ip('-n', ns, 'addr', 'add', `${host.ip}/24`, 'dev', inNs);
    ip('-n', ns, 'link', 'set', inNs, 'up');
    return host;
  }

  /** argv run inside the host's namespace. */
  wrap(host: Host): (argv: string[]) => string[] {
    return (argv) => ['ip', 'netns', 'exec', host.ns, ...argv];
  }

  /** Removes every namespace and the bridge this network made, by name (processes in them must be stopped first). */
  destroy(): void {
    for (const h of this.hosts.values()) spawnSync('ip', ['netns', 'delete', h.ns]);
    this.hosts.clear();
    if (this.bridgeUp) spawnSync('ip', ['link', 'delete', this.bridge]);
    this.bridgeUp = false;
  }
}
