// The chat page's files: those picked for the next message (`state.files`: {name, type, id?, error?}), uploaded at
// once (POST /v1/files/upload) and shown as chips in the composer, and the images a sent message carries, shown in
// it as soon as the turn names its message (issue 42). Owns the file input, the attachment chips and the upload.

import { actionButton, el, renderFile } from './turn-view.js';

const IMAGES = ['.png', '.jpg', '.jpeg', '.webp', '.gif'];

/** `page`: {state, api, $, say, q, renderBusy(), conversationOf(turn)}. Returns {renderFiles, showSentImages}. */
export function chatFiles(page) {
  const { state, api, $, say, q } = page;

  /** 'image', 'document', or null when the app does not take the file (GET /v1/parameters' file_upload). */
  function kindOf(name) {
    const ext = `.${(name.split('.').pop() || '').toLowerCase()}`;
    const upload = state.app?.upload;
    if (!upload || !upload.extensions.includes(ext)) return null;
    return IMAGES.includes(ext) ? 'image' : 'document';
  }

  function renderFiles() {
    const box = $('attachments');
    box.textContent = '';
    for (const f of state.files) {
      const chip = el('span', `chip${f.id ? '' : f.error ? ' failed' : ' uploading'}`, f.error ? `${f.name}: ${f.error}` : f.name);
      chip.dataset.name = f.name;
      const x = actionButton('×', () => {
        state.files = state.files.filter((g) => g !== f);
        renderFiles();
      });
      x.setAttribute('aria-label', `Remove ${f.name}`);
      chip.append(x);
      box.append(chip);
    }
    page.renderBusy();
  }

  async function upload(file) {
    const type = kindOf(file.name);
    const entry = { name: file.name, type };
    if (!type) {
      entry.error = 'this app does not take that kind of file';
      state.files.push(entry);
      return renderFiles();
    }
    const limit = state.app.upload.max;
    if (state.files.filter((f) => !f.error).length >= limit) {
      say(`At most ${limit} files per message.`);
      return;
    }
    state.files.push(entry);
    renderFiles();
    try {
      const form = new FormData();
      form.append('file', file);
      form.append('user', state.user);
      const res = await api.request('/v1/files/upload', { method: 'POST', body: form });
      entry.id = (await res.json()).id;
    } catch (err) {
      entry.error = err.message;
    }
    renderFiles();
  }

  $('file').addEventListener('change', async (ev) => {
    const files = [...ev.target.files];
    ev.target.value = '';
    await Promise.all(files.map(upload));
  });

  /**
   * A sent image shows in its message at once (issue 42), as it does from history: once the turn names its message,
   * the message's own signed file links (GET /v1/messages) — the CSP allows only this origin's images, so no blob: URL.
   */
  async function showSentImages(question, turn) {
    if (!question || !(turn.sentFiles || []).some((f) => f.type === 'image')) return;
    try {
      // The same event names the conversation of a new chat, just after the task.
      await null;
      const c = page.conversationOf(turn);
      const { data } = await api.get(`/v1/messages?conversation_id=${q(c)}&user=${q(state.user)}&limit=100&branch_id=${q(turn.taskId)}`);
      const m = data.find((x) => x.id === turn.taskId);
      if (!m || !question.isConnected) return;
      const images = m.message_files.filter((f) => f.belongs_to === 'user' && f.type === 'image' && f.url);
      for (const f of images) renderFile(question, f);
      // The names the chips said stay for the other files; an image's name is its picture's alt text now.
      const names = question.querySelector('.sent-files');
      for (const f of images) names?.querySelector(`[data-upload="${CSS.escape(f.upload_file_id || '')}"]`)?.remove();
      if (names && !names.childElementCount) names.remove();
    } catch {
      // The history shows them.
    }
  }

  return { renderFiles, showSentImages };
}
