// The chat page's app key (issue 42 problem 7): read from the URL fragment (#key=… — never sent to a server) into this
// tab's sessionStorage and taken off the address bar; a new #key= pasted into the tab later takes effect at once
// (hashchange), no reload. A key the api refuses (401: revoked or mistyped) turns the page into one full-page error
// that says so and what to do, with a box to paste a key into.

const STORE = 'agent-chat-key';
const $ = (id) => document.getElementById(id);

/** Moves a #key= of the address into this tab's storage; the tab's key (or ''). */
export function readKey() {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('key')) {
    sessionStorage.setItem(STORE, hash.get('key'));
    history.replaceState(null, '', `${location.pathname}${location.search}`);
  }
  return sessionStorage.getItem(STORE) || '';
}

export function storeKey(key) {
  sessionStorage.setItem(STORE, key);
}

/** Calls `onKey(key)` whenever a new #key= is pasted into this tab (the same document: the page keeps running). */
export function onPastedKey(onKey) {
  window.addEventListener('hashchange', () => {
    if (!new URLSearchParams(location.hash.slice(1)).get('key')) return;
    onKey(readKey());
  });
}

/** Shows (or hides) the full-page error of a key that does not work; `onKey(key)` takes a key pasted into its box. */
export function showKeyError(show, onKey) {
  document.body.classList.toggle('key-invalid', show);
  const panel = $('key-error');
  panel.hidden = !show;
  if (!show) return;
  const form = $('key-error-form');
  if (!form.dataset.wired) {
    form.dataset.wired = '1';
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const key = $('key-error-input').value.trim();
      if (!key) return;
      storeKey(key);
      $('key-error-input').value = '';
      onKey(key);
    });
  }
  panel.querySelector('h1').focus();
}
