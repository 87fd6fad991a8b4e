/**
 * core/platform/storable-text.ts (issue 47): NUL and lone surrogates become U+FFFD, in plain text and in any JSON text
 * (JSON.stringify's, or a peer's with escaped pairs and upper-case hex), and nothing else changes; and the api's intake
 * of a backend's event stream (AgentBackendClient.streamEvents over real HTTP) applies it whatever the backend sent.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { storableJson, storableJsonText, storableText } from '../../core/platform/storable-text.js';

const R = '\ufffd';

describe('storableText', () => {
  it.each([
    ['plain text', 'hello', 'hello'],
    ['a NUL', 'a\u0000b', `a${R}b`],
    ['NULs only', '\u0000\u0000', `${R}${R}`],
    ['a lone high surrogate', 'x\ud800y', `x${R}y`],
    ['a lone low surrogate', 'x\udc00y', `x${R}y`],
    ['a high surrogate at the end', 'x\ud83d', `x${R}`],
    ['a whole pair', 'x\ud83d\ude00y', 'x\u{1F600}y'],
    ['two highs then a low: one lone, one pair', '\ud83d\ud83d\ude00', `${R}\u{1F600}`],
    ['NUL beside a pair and a lone one', '\u0000\u{1F600}\udfff', `${R}\u{1F600}${R}`],
    ['U+FFFD itself and other controls', `${R}\u0001\u001b[0m`, `${R}\u0001\u001b[0m`],
  ])('%s', (_name, input, expected) => {
    expect(storableText(input)).toBe(expected);
  });

  it('returns the very string when there is nothing to replace', () => {
    const s = 'nothing to do here \u{1F600}';
    expect(storableText(s)).toBe(s);
  });
});

describe('storableJsonText', () => {
  it.each([
    ['no escapes', '{"a":"b"}', '{"a":"b"}'],
    ['a NUL escape', '"a\\u0000b"', `"a\\ufffdb"`],
    ['a lone surrogate escape', '"\\ud800"', '"\\ufffd"'],
    ['upper-case hex', '"\\uD800 \\uDFFF"', '"\\ufffd \\ufffd"'],
    ['an escaped pair is kept', '"\\ud83d\\ude00"', '"\\ud83d\\ude00"'],
    ['an escaped pair in upper case is kept', '"\\uD83D\\uDE00"', '"\\uD83D\\uDE00"'],
    ['a low before a high is two lone ones', '"\\ude00\\ud83d"', '"\\ufffd\\ufffd"'],
    ['an escaped backslash before u0000 is text', '"\\\\u0000"', '"\\\\u0000"'],
    ['an escaped backslash then a real NUL escape', '"\\\\\\u0000"', '"\\\\\\ufffd"'],
    ['other \\u escapes are kept', '"\\u001b\\u00e9\\ud7ff\\ue000"', '"\\u001b\\u00e9\\ud7ff\\ue000"'],
    ['in a key', '{"k\\u0000":1}', '{"k\\ufffd":1}'],
  ])('%s', (_name, input, expected) => {
    const out = storableJsonText(input);
    expect(out).toBe(expected);
    // Whatever it was, the result is JSON whose strings are all storable.
    const strings: string[] = [];
    JSON.parse(out, (k, v) => (strings.push(k, typeof v === 'string' ? v : ''), v));
    for (const s of strings) expect(storableText(s)).toBe(s);
  });

  it('storableJson of values holding NUL and lone surrogates, in keys and nested strings', () => {
    const value = { ['ke\u0000y']: ['a\u0000', { deep: 'x\ud800' }], pair: '\u{1F600}', n: 1, t: null };
    expect(JSON.parse(storableJson(value))).toEqual({ [`ke${R}y`]: [`a${R}`, { deep: `x${R}` }], pair: '\u{1F600}', n: 1, t: null });
    expect(storableJson(undefined)).toBe('null');
  });
});

describe("the api's intake of a backend's events", () => {
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    // A backend of another make: its events carry NUL and lone surrogates as JSON escapes.
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const frame = (id: number, type: string, data: string) =>
        res.write(
          `id: ${id}\nevent: ${type}\ndata: {"id":"${id}","run_id":"r1","created_at":"2026-12-12T00:00:00Z","type":"${type}","data":${data}}\n\n`,
        );
      frame(1, 'agent_message_delta', '{"delta":"nul\\u0000 and \\udbff lone, \\ud83d\\ude00 pair"}');
      frame(2, 'run_failed', '{"error":"bro\\u0000ken","output":"half \\ud800","reason":"model_error"}');
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server?.close());

  it('yields them with U+FFFD in place of each, a whole pair kept', async () => {
    const client = new AgentBackendClient(url, 'token');
    const events = [];
    for await (const e of client.streamEvents('r1', null)) events.push(e);
    expect(events.map((e) => e.type)).toEqual(['agent_message_delta', 'run_failed']);
    expect(events[0]!.data).toEqual({ delta: `nul${R} and ${R} lone, \u{1F600} pair` });
    expect(events[1]!.data).toEqual({ error: `bro${R}ken`, output: `half ${R}`, reason: 'model_error' });
  });
});
