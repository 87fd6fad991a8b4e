// The chat page's conversation list: the end user's conversations (GET /v1/conversations), the open one marked, the
// ones with a turn in flight marked "answering" or "waiting for you" (the list's `active_turn`, issue 42 problem 2),
// rename in place and delete with a second click.

import { icon } from './lib/icons.js';
import { el } from './turn-view.js';

const q = (s) => encodeURIComponent(s);

/**
 * `ctx`: {api, state, say, actionButton, open(id), beforeDelete(c), afterDelete(c)}; `state.conversations` holds the
 * list, `state.conversationId` the open one. Returns {load, render, settle}.
 */
export function conversationList(ctx) {
  const { api, state, say, actionButton } = ctx;
  const ul = document.getElementById('conversations');

  async function load() {
    if (!state.key) return;
    try {
      const { data } = await api.get(`/v1/conversations?user=${q(state.user)}&limit=50`);
      state.conversations = data;
      render();
    } catch (err) {
      if (err.status !== 401) say(err.message);
    }
  }

  /** This page's own turn of conversation `id` started (`messageId`) or ended (null): marked at once, not at the next load. */
  function settle(id, messageId, status = 'running') {
    const c = state.conversations.find((x) => x.id === id);
    if (!c) return;
    if (messageId) c.active_turn = { message_id: messageId, status };
    else if (c.active_turn) c.active_turn = null;
    render();
  }

  function render() {
    ul.textContent = '';
    for (const c of state.conversations) {
      const turn = c.active_turn;
      const waiting = turn?.status === 'paused';
      const li = el('li', [c.id === state.conversationId ? 'active' : '', turn ? (waiting ? 'waiting' : 'running') : ''].join(' ').trim());
      li.dataset.id = c.id;
      const open = actionButton(c.name || 'New conversation', () => void ctx.open(c.id), { cls: 'open' });
      if (c.id === state.conversationId) open.setAttribute('aria-current', 'true');
      li.append(open);
      if (turn) li.append(el('span', 'running-mark', waiting ? 'waiting for you' : 'answering'));
      li.append(
        actionButton('Rename', () => startRename(li, c), { cls: 'act rename', icon: 'edit', aria: `Rename ${c.name}` }),
        actionButton('Delete', (ev) => void remove(ev.currentTarget, c), { cls: 'act delete', icon: 'trash', aria: `Delete ${c.name}` }),
      );
      ul.append(li);
    }
  }

  function startRename(li, c) {
    const input = el('input');
    input.value = c.name;
    input.setAttribute('aria-label', 'Conversation name');
    li.replaceChildren(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const name = input.value.trim();
      if (save && name && name !== c.name) {
        try {
          await api.post(`/v1/conversations/${c.id}/name`, { name, user: state.user });
          c.name = name;
        } catch (err) {
          say(`Rename failed: ${err.message}`);
        }
      }
      render();
    };
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') void finish(true);
      if (ev.key === 'Escape') void finish(false);
    });
    input.addEventListener('blur', () => void finish(true));
  }

  /** Delete asks once more in place: the button turns into "Delete?" for a few seconds. */
  async function remove(button, c) {
    if (!button.classList.contains('confirm')) {
      button.classList.add('confirm');
      button.replaceChildren('Delete?');
      setTimeout(() => {
        if (button.isConnected) {
          button.classList.remove('confirm');
          button.replaceChildren(icon('trash'));
        }
      }, 4000);
      return;
    }
    try {
      ctx.beforeDelete(c);
      await api.del(`/v1/conversations/${c.id}`, { user: state.user });
      ctx.afterDelete(c);
      say('Conversation deleted.');
    } catch (err) {
      say(`Delete failed: ${err.message}`);
    }
    await load();
  }

  return { load, render, settle };
}
