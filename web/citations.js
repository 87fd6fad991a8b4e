// The citations card under a knowledge answer (issue 42 problem 6): Dify's `retriever_resources` (message_end's
// metadata while it streams, GET /v1/messages from history) as one row per chunk — its number (what the answer cites
// as "[1]"), the document, the dataset and the score — each opening to the chunk's text. Rendered as text only.
import './citations.css';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

let cards = 0;

/** Shows (or replaces) the citations of the answer in `box`; nothing when there are none. */
export function renderCitations(box, resources) {
  box.querySelector('.citations')?.remove();
  if (!Array.isArray(resources) || resources.length === 0) return;
  const card = el('section', 'citations');
  const title = el('h2', 'citations-title', resources.length === 1 ? 'Citation' : `Citations (${resources.length})`);
  // Unique in the page even when one message shows twice (the studio's debugger and its logs).
  title.id = `citations-${++cards}`;
  card.setAttribute('aria-labelledby', title.id);
  card.append(title);
  const list = el('ol', 'citation-list');
  for (const r of resources) {
    const item = el('li', 'citation');
    item.dataset.segment = r.segment_id || '';
    const details = el('details');
    const summary = el('summary');
    summary.append(
      el('span', 'citation-n', `[${r.position}]`),
      el('span', 'citation-doc', r.document_name || 'document'),
      el('span', 'citation-dataset', r.dataset_name || ''),
      el('span', 'citation-score', typeof r.score === 'number' ? `score ${r.score.toFixed(2)}` : ''),
    );
    details.append(summary, el('div', 'citation-text', r.content || '(no text kept for this chunk)'));
    item.append(details);
    list.append(item);
  }
  card.append(list);
  // Under the answer and its files, above its actions.
  const after = box.querySelector('.files') || box.querySelector('.text');
  after.after(card);
}
