// Answers as people read them: Markdown (GFM: headings, lists, tables, fenced code) parsed by marked (raw HTML shown
// as text) and sanitised by DOMPurify before it reaches the page. Nothing the model writes can run: no script, no event handler, no style,
// no form, no frame; links open in a new tab without an opener; images become links (the CSP allows only this
// origin's images, and a model's image URL is not a file of this app); code blocks get a copy button and syntax
// highlighting (lib/highlight.js, highlight.js loaded lazily from this origin with the first code block).
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const escapeHtml = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
// Raw HTML in an answer is shown as the text it is (as Dify's react-markdown does): never parsed, so not even the
// browser's parser sees its handlers (Chrome reports a CSP violation for an inline handler as soon as it parses one).
const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: { html: ({ text, block }) => (block ? `<p>${escapeHtml(text)}</p>` : escapeHtml(text)) },
});

const purify = DOMPurify(window);
purify.addHook('afterSanitizeAttributes', (node) => {
  // Only a code block's language class survives (page classes in an answer could restyle the page).
  const cls = node.getAttribute('class');
  if (cls !== null) {
    if (/^language-[\w+-]+$/.test(cls)) node.setAttribute('class', cls);
    else node.removeAttribute('class');
  }
  // An image never loads while the fragment is built: its source is kept aside and the image becomes a link below.
  if (node.tagName === 'IMG') {
    node.setAttribute('data-md-src', node.getAttribute('src') || '');
    node.removeAttribute('src');
    node.removeAttribute('srcset');
  }
  if (node.tagName === 'A') {
    const href = node.getAttribute('href') || '';
    if (!/^(https?:|mailto:|#|\/)/i.test(href)) node.removeAttribute('href');
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});
const POLICY = {
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed', 'svg', 'math'],
  FORBID_ATTR: ['style', 'id', 'srcset'],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

/** Copies text to the clipboard; resolves false when the browser refuses (no permission, insecure context). */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

function copyButton(getText, label = 'Copy') {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'copy';
  b.textContent = label;
  b.addEventListener('click', async () => {
    const ok = await copyText(getText());
    b.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => (b.textContent = label), 1500);
  });
  return b;
}

/** A sanitised DOM fragment of `markdown`. */
export function markdownFragment(markdown) {
  const frag = purify.sanitize(marked.parse(markdown || '').trim(), POLICY);
  for (const img of frag.querySelectorAll('img')) {
    const src = img.getAttribute('data-md-src') || '';
    const a = document.createElement('a');
    a.textContent = img.getAttribute('alt') || src || 'image';
    if (/^https?:/i.test(src)) {
      a.href = src;
      a.target = '_blank';
      a.rel = 'noopener noreferrer nofollow';
    }
    img.replaceWith(a);
  }
  for (const pre of frag.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    const wrap = document.createElement('div');
    wrap.className = 'code-block';
    const head = document.createElement('div');
    head.className = 'code-head';
    const lang = /language-([\w+-]+)/.exec(code?.getAttribute('class') || '')?.[1] || 'code';
    const name = document.createElement('span');
    name.textContent = lang;
    head.append(
      name,
      copyButton(() => (code || pre).textContent, 'Copy code'),
    );
    pre.replaceWith(wrap);
    wrap.append(head, pre);
    pre.tabIndex = 0; // scrollable region: reachable by keyboard
  }
  for (const table of frag.querySelectorAll('table')) {
    const wrap = document.createElement('div');
    wrap.className = 'table-wrap';
    wrap.tabIndex = 0;
    table.replaceWith(wrap);
    wrap.append(table);
  }
  return frag;
}

/** The highlighter's chunk, imported once, when the first code block is rendered. */
let highlighter = null;

/** Highlights the code blocks under `root` (highlight.js loaded on first use; a failed load leaves them plain). */
export function highlightBlocks(root) {
  const blocks = [...root.querySelectorAll('pre code[class*="language-"]')];
  if (!blocks.length) return;
  highlighter ??= import('./highlight.js');
  void highlighter.then(
    ({ highlightCode }) => {
      for (const code of blocks) if (code.isConnected) highlightCode(code);
    },
    () => undefined,
  );
}

/** Renders `markdown` into `target` (replacing its content). */
export function renderMarkdown(target, markdown) {
  target.replaceChildren(markdownFragment(markdown));
  target.classList.add('md');
  highlightBlocks(target);
}

export { copyButton };
