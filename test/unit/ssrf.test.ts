/**
 * The SSRF guard (core/platform/net/ssrf.ts) on its own: which addresses and URLs are refused and why, and its two fetches
 * connecting to the address they checked (never resolving the name again). A real HTTP server on 127.0.0.1 plays
 * the remote host; "files.example.test" does not exist in DNS, so only the pinned address can reach it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AddressRefusedError,
  checkUrl,
  createGuardedFetch,
  fetchPinned,
  isForbiddenAddress,
  type Lookup,
} from '../../core/platform/net/ssrf.js';

describe('isForbiddenAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '0.0.0.0',
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '169.254.169.254',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '::127.0.0.1',
    '64:ff9b::a00:1',
    '2002:7f00:1::',
    'fe80::1',
    'fe80::1%eth0',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    '2001:db8::1',
    'not-an-ip',
  ])('refuses %s', (ip) => expect(isForbiddenAddress(ip)).toBe(true));

  it.each([
    '8.8.8.8',
    '93.184.216.34',
    '172.32.0.1',
    '1.1.1.1',
    '::ffff:8.8.8.8',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '64:ff9b::808:808',
  ])('allows the public address %s', (ip) => expect(isForbiddenAddress(ip)).toBe(false));
});

describe('checkUrl', () => {
  const refused = async (url: string, lookup?: Lookup, signal?: AbortSignal) => {
    const err = await checkUrl(url, { lookup }, signal).then(
      () => null,
      (e: Error) => e,
    );
    expect(err, url).toBeInstanceOf(AddressRefusedError);
    return err!.message;
  };

  it('refuses other schemes than http and https, and what is not a URL', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://example.com/x', 'gopher://example.com/', 'data:text/plain,hi', 'javascript:alert(1)']) {
      expect(await refused(url)).toBe('only http and https URLs are allowed');
    }
    expect(await refused('not a url')).toBe('not a url is not a valid URL');
  });

  it('refuses numeric spellings of loopback that URL parsing normalises', async () => {
    for (const url of [
      'http://2130706433/',
      'http://0x7f.1/',
      'http://0177.0.0.1/',
      'http://127.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://[0:0:0:0:0:0:0:1]/',
    ])
      expect(await refused(url)).toContain('non-public address');
  });

  it('refuses a host name when any of its addresses is private, and one that does not resolve in time', async () => {
    await refused('http://internal.example/', async () => ['93.184.216.34', '10.0.0.5']);
    await refused('http://rebind.example/', async () => ['::ffff:192.168.0.1']);
    expect(await refused('http://nowhere.example/', async () => Promise.reject(new Error('ENOTFOUND')))).toContain('could not be resolved');
    expect(await refused('http://empty.example/', async () => [])).toContain('could not be resolved');
    const slow = () => new Promise<string[]>(() => undefined);
    expect(await refused('http://slow.example/', slow, AbortSignal.timeout(200))).toContain('could not be resolved');
  }, 10_000);

  it('accepts public addresses and names that resolve only to them, and pins the first', async () => {
    expect((await checkUrl('https://93.184.216.34/a.png', {})).address).toBe('93.184.216.34');
    const checked = await checkUrl('http://cdn.example/a.png', { lookup: async () => ['93.184.216.34', '2606:4700::1'] });
    expect([checked.url.href, checked.address]).toEqual(['http://cdn.example/a.png', '93.184.216.34']);
  });

  it('allowPrivate (the deployment trusts its network) and isAllowed widen what is accepted', async () => {
    expect((await checkUrl('http://127.0.0.1:1/', { allowPrivate: true })).address).toBe('127.0.0.1');
    expect((await checkUrl('http://x.example/', { lookup: async () => ['10.0.0.5'], isAllowed: (a) => a === '10.0.0.5' })).address).toBe(
      '10.0.0.5',
    );
    await expect(checkUrl('http://x.example/', { lookup: async () => ['10.0.0.6'], isAllowed: (a) => a === '10.0.0.5' })).rejects.toThrow(
      AddressRefusedError,
    );
  });
});

let server: http.Server;
let port: number;
const hosts: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hosts.push(req.headers.host ?? '');
    if (req.url === '/doc.txt') return void res.end('remote text');
    if (req.url === '/echo' && req.method === 'POST') return void req.pipe(res);
    if (req.url === '/to-private') return void res.writeHead(302, { location: 'http://10.1.2.3/secret' }).end();
    if (req.url === '/to-doc') return void res.writeHead(301, { location: '/doc.txt' }).end();
    if (req.url === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
    if (req.url === '/stall') return void res.writeHead(200).write('partial');
    if (req.url === '/big') return void res.end('x'.repeat(2000));
    if (req.url === '/big-chunked') {
      res.writeHead(200, { 'transfer-encoding': 'chunked' });
      for (let i = 0; i < 20; i++) res.write('y'.repeat(100));
      return void res.end();
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server.closeAllConnections();
  return new Promise((r) => server.close(r));
});

const opts = { maxBytes: 1000, lookup: async () => ['127.0.0.1'], isAllowed: (a: string) => a === '127.0.0.1' };

describe('createGuardedFetch (tools, webhooks, model base URLs)', () => {
  it('connects to the checked address with the original host name, and streams the answer', async () => {
    hosts.length = 0;
    const fetch = createGuardedFetch({ allowPrivate: true, lookup: async () => ['127.0.0.1'] });
    const res = await fetch(`http://files.example.test:${port}/echo`, { method: 'POST', body: 'ping' });
    expect([res.status, await res.text()]).toEqual([200, 'ping']);
    expect(hosts).toEqual([`files.example.test:${port}`]);
  });

  it('returns a redirect as it is instead of following it', async () => {
    const res = await createGuardedFetch({ allowPrivate: true })(`http://127.0.0.1:${port}/to-private`);
    expect([res.status, res.headers.get('location')]).toEqual([302, 'http://10.1.2.3/secret']);
  });

  it('refuses private addresses unless allowed, before connecting', async () => {
    hosts.length = 0;
    await expect(createGuardedFetch({ allowPrivate: false })(`http://127.0.0.1:${port}/doc.txt`)).rejects.toThrow(AddressRefusedError);
    expect(hosts).toEqual([]);
  });
});

describe('fetchPinned (remote_url files, workspace placement)', () => {
  it('connects to the checked address, with the original host name', async () => {
    hosts.length = 0;
    const body = await fetchPinned(`http://files.example.test:${port}/doc.txt`, opts);
    expect(body.toString()).toBe('remote text');
    expect(hosts).toEqual([`files.example.test:${port}`]);
  });

  it('follows a redirect only after checking the next hop: a redirect to a private address is refused', async () => {
    await expect(fetchPinned(`http://files.example.test:${port}/to-private`, opts)).rejects.toThrow(
      'resolves to a private, loopback or otherwise non-public address',
    );
    expect((await fetchPinned(`http://files.example.test:${port}/to-doc`, opts)).toString()).toBe('remote text');
    await expect(fetchPinned(`http://files.example.test:${port}/loop`, opts)).rejects.toThrow('too many redirects');
  });

  it('refuses private addresses by default (the api SSRF policy)', async () => {
    await expect(fetchPinned(`http://127.0.0.1:${port}/doc.txt`, { maxBytes: 1000 })).rejects.toThrow('non-public address');
    await expect(
      fetchPinned(`http://files.example.test:${port}/doc.txt`, { maxBytes: 1000, lookup: async () => ['169.254.169.254'] }),
    ).rejects.toThrow('non-public');
  });

  it('stops at the size cap, with or without a Content-Length, and names a failed status', async () => {
    await expect(fetchPinned(`http://files.example.test:${port}/big`, opts)).rejects.toThrow('larger than 1000 bytes');
    await expect(fetchPinned(`http://files.example.test:${port}/big-chunked`, opts)).rejects.toThrow('larger than 1000 bytes');
    await expect(fetchPinned(`http://files.example.test:${port}/missing`, opts)).rejects.toThrow('the server answered 404');
  });

  it('gives up after its deadline, also when the body stalls', async () => {
    await expect(fetchPinned(`http://files.example.test:${port}/stall`, { ...opts, timeoutMs: 300 })).rejects.toThrow(
      'the download took too long',
    );
  });
});
