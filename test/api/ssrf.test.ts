/** The remote_url guard on its own: which addresses and URLs are refused, and why. */
import { describe, expect, it } from 'vitest';
import { assertPublicUrl, isForbiddenAddress } from '../../api/ssrf.js';

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

describe('assertPublicUrl', () => {
  const refused = async (url: string, lookup?: (h: string) => Promise<string[]>) => {
    const err = await assertPublicUrl(url, { field: 'files.0.url', lookup }).then(
      () => null,
      (e: Error & { status?: number; code?: string }) => e,
    );
    expect(err, url).not.toBeNull();
    expect(err!.status).toBe(400);
    expect(err!.code).toBe('invalid_remote_url');
    expect(err!.message).toContain('files.0.url');
    return err!.message;
  };

  it('refuses other schemes than http and https', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://example.com/x', 'gopher://example.com/', 'data:text/plain,hi', 'javascript:alert(1)']) {
      expect(await refused(url)).toContain('http');
    }
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
      await refused(url);
  });

  it('refuses a host name when any of its addresses is private, and one that does not resolve', async () => {
    await refused('http://internal.example/', async () => ['93.184.216.34', '10.0.0.5']);
    await refused('http://rebind.example/', async () => ['::ffff:192.168.0.1']);
    expect(await refused('http://nowhere.example/', async () => Promise.reject(new Error('ENOTFOUND')))).toContain('could not be resolved');
    expect(await refused('http://slow.example/', () => new Promise(() => undefined))).toContain('could not be resolved');
  }, 10_000);

  it('accepts public addresses and names that resolve only to them', async () => {
    expect((await assertPublicUrl('https://93.184.216.34/a.png')).hostname).toBe('93.184.216.34');
    expect((await assertPublicUrl('http://cdn.example/a.png', { lookup: async () => ['93.184.216.34', '2606:4700::1'] })).href).toBe(
      'http://cdn.example/a.png',
    );
  });
});
