/**
 * The fetcher that downloads a turn's remote_url files into the workspace: it connects to the address it
 * checked (never resolving the name again), checks every redirect hop the same way, and stops at a size cap.
 * A real HTTP server on 127.0.0.1 plays the remote host; `isAllowed` admits only that address.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchPinned, safeName } from '../../turn/steps/workspace-files.js';

let server: http.Server;
let port: number;
const hosts: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hosts.push(req.headers.host ?? '');
    if (req.url === '/doc.txt') return void res.end('remote text');
    if (req.url === '/to-private') return void res.writeHead(302, { location: 'http://10.1.2.3/secret' }).end();
    if (req.url === '/to-doc') return void res.writeHead(301, { location: '/doc.txt' }).end();
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

// "files.example.test" does not exist in DNS: only the pinned address can reach the server.
const opts = { maxBytes: 1000, lookup: async () => ['127.0.0.1'], isAllowed: (a: string) => a === '127.0.0.1' };

describe('fetchPinned', () => {
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
  });

  it('refuses private addresses by default (the api SSRF policy)', async () => {
    await expect(fetchPinned(`http://127.0.0.1:${port}/doc.txt`, { maxBytes: 1000 })).rejects.toThrow('non-public address');
    await expect(
      fetchPinned(`http://files.example.test:${port}/doc.txt`, { maxBytes: 1000, lookup: async () => ['169.254.169.254'] }),
    ).rejects.toThrow('non-public');
  });

  it('stops at the size cap, with or without a Content-Length', async () => {
    await expect(fetchPinned(`http://files.example.test:${port}/big`, opts)).rejects.toThrow('larger than 1000 bytes');
    await expect(fetchPinned(`http://files.example.test:${port}/big-chunked`, opts)).rejects.toThrow('larger than 1000 bytes');
  });

  it('gives up after its deadline, also when the body stalls', async () => {
    await expect(fetchPinned(`http://files.example.test:${port}/stall`, { ...opts, timeoutMs: 300 })).rejects.toThrow(
      'the download took too long',
    );
  });

  it('names files safely inside the workspace', () => {
    expect(safeName('../../etc/passwd', 'f')).toBe('passwd');
    expect(safeName('.hidden', 'f')).toBe('hidden');
    expect(safeName('/', 'file-1')).toBe('file-1');
    expect(safeName('report (final).pdf', 'f')).toBe('report _final_.pdf');
  });
});
