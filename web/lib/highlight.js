// Syntax highlighting of an answer's code blocks (issue 42 problem 5) with highlight.js (npm, pinned in package.json;
// bundled by scripts/build-web.ts into a chunk of its own that markdown.js imports only when an answer has a fenced
// code block: the pages' first load does not carry it, and nothing comes from a CDN). The core and the languages
// agents write most; a block's fence names its language (```js), an unknown or missing one stays plain text. The
// colours are in lib/messages.css (.hljs-*), readable on the code block's dark background.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import csharp from 'highlight.js/lib/languages/csharp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import kotlin from 'highlight.js/lib/languages/kotlin';
import markdown from 'highlight.js/lib/languages/markdown';
import php from 'highlight.js/lib/languages/php';
import plaintext from 'highlight.js/lib/languages/plaintext';
import python from 'highlight.js/lib/languages/python';
import ruby from 'highlight.js/lib/languages/ruby';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import swift from 'highlight.js/lib/languages/swift';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = {
  bash,
  c,
  cpp,
  csharp,
  css,
  diff,
  dockerfile,
  go,
  ini,
  java,
  javascript,
  json,
  kotlin,
  markdown,
  php,
  plaintext,
  python,
  ruby,
  rust,
  shell,
  sql,
  swift,
  typescript,
  xml,
  yaml,
};
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** Highlights one `<code class="language-…">` in place (its text stays the same); false when its language is unknown. */
export function highlightCode(code) {
  if (code.dataset.highlighted) return true;
  const lang = /(?:^|\s)language-([\w+-]+)/.exec(code.className)?.[1];
  if (!lang || !hljs.getLanguage(lang)) return false;
  // highlight.js escapes the text it is given: its result is spans around that text, never the text's own markup.
  code.innerHTML = hljs.highlight(code.textContent, { language: lang, ignoreIllegals: true }).value;
  code.classList.add('hljs');
  code.dataset.highlighted = lang;
  return true;
}
