/**
 * Issue 17 M1: prompt mention expansion runs in linear time. A console user (draft prompt) or an agent
 * (through the stub) controls the prompt, and it is expanded in the shared worker process; the former
 * SLASH regex backtracked quadratically on `{{#a.b.` + spaces with no closing `#}}` and stalled every
 * tenant. Each adversarial input below (1 MB) must expand within a 2 s budget enforced by a V8 watchdog
 * (vm timeout, which interrupts even a running regex); the former code needed minutes for each.
 */
import fc from 'fast-check';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { expandPromptMentions, type MentionResolver } from '../../core/domain/mentions.js';

/** The former implementation: the specification of the output (not of the running time). */
function reference(text: string, resolve: MentionResolver = () => undefined): string {
  const SLASH = /\{\{#\s*([A-Za-z_][\w-]*)\.([^.#}]+)(?:\.([^#}]*))?\s*#\}\}/g;
  const MARKER = /\[§([A-Za-z_][\w-]*):([^:§\]]+)(?::([^§\]]*))?§\]/g;
  const sub = (_m: string, kind: string, id: string, label?: string) => resolve(kind, id.trim()) ?? (label?.trim() || id.trim());
  return text
    .replace(SLASH, sub)
    .replace(MARKER, sub)
    .replace(/\{\{#[^}]*#\}\}/g, '')
    .replace(/\[§[^\]]*§\]/g, '');
}

function withinBudget(text: string): string {
  return vm.runInNewContext('expand(text)', { expand: expandPromptMentions, text }, { timeout: 2_000 }) as string;
}

const MB = 1_000_000;
const ADVERSARIAL: [string, string][] = [
  ['the reviewer’s payload: an unclosed slash mention followed by spaces', '{{#a.b.' + ' '.repeat(MB)],
  ['an unclosed slash mention with a long id', '{{#a.' + ' '.repeat(MB)],
  ['spaces after the opening', '{{#' + ' '.repeat(MB)],
  ['a million openings with no closing brace', '{{#'.repeat(MB / 3)],
  ['openings that each almost match', '{{#a.b'.repeat(MB / 6)],
  ['unclosed markers', '[§a:'.repeat(MB / 4)],
  ['marker openings with no closing bracket', '[§'.repeat(MB / 2)],
  ['an unclosed marker with a long label', '[§a:b:' + ' '.repeat(MB)],
  ['alternating openings and stray closers', '{{#a.b #}'.repeat(MB / 9) + '[§x:y§'.repeat(MB / 6)],
];

describe('M1: mention expansion cannot be made to stall the process', () => {
  for (const [name, text] of ADVERSARIAL) {
    it(`expands ${name} (1 MB) within the budget`, () => {
      expect(() => withinBudget(text)).not.toThrow();
    });
  }

  it('produces exactly what the former regexes produced, on arbitrary text built from the mention alphabet', () => {
    const alphabet = fc.constantFrom(
      '{',
      '}',
      '#',
      '.',
      '§',
      '[',
      ']',
      ':',
      ' ',
      '\t',
      'a',
      'B',
      '_',
      '-',
      '1',
      '{{#',
      '#}}',
      '[§',
      '§]',
      'x.y',
    );
    const resolver = fc.constantFrom<MentionResolver>(
      () => undefined,
      (kind, id) => (kind === 'a' ? `<${id}>` : undefined),
      () => '',
    );
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 40 }).map((parts) => parts.join('')),
        resolver,
        (text, resolve) => {
          expect(expandPromptMentions(text, resolve)).toBe(reference(text, resolve));
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('still expands the documented forms', () => {
    const resolve: MentionResolver = (kind, id) => (kind === 'tool' && id === 'search' ? 'the Search tool' : undefined);
    expect(
      expandPromptMentions('Use {{# tool.search #}}, {{#sys.query.the question#}}, [§dataset:ds1:Handbook§] and [§file:f9§].', resolve),
    ).toBe('Use the Search tool, the question, Handbook and f9.');
    expect(expandPromptMentions('broken {{##}} and [§§] gone')).toBe('broken  and  gone');
  });
});
