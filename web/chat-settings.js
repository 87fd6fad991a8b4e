// The chat page's settings: the user name (localStorage, one per browser) and the app key (chat-key.js) in the
// settings box, and the conversation open in this tab (sessionStorage), which survives a reload (issue 42 problem 2:
// a turn running in it is re-attached). Owns those stored values and the settings box; a new key goes to `page.useKey`.

import { readKey, storeKey } from './chat-key.js';

const OPEN_CONVERSATION = 'agent-chat-conversation';
const USER = 'agent-chat-user';

/** `page`: {state, $, useKey(key)}. Returns {loadSettings, setConversation}. */
export function chatSettings(page) {
  const { state, $ } = page;

  function setConversation(id) {
    state.conversationId = id;
    if (id) sessionStorage.setItem(OPEN_CONVERSATION, id);
    else sessionStorage.removeItem(OPEN_CONVERSATION);
  }

  /** The key, the user and the conversation this tab had open (the settings box opens when there is no key). */
  function loadSettings() {
    state.key = readKey();
    state.user = localStorage.getItem(USER) || `web-${Math.random().toString(36).slice(2, 10)}`;
    localStorage.setItem(USER, state.user);
    $('api-key').value = state.key;
    $('user').value = state.user;
    if (!state.key) $('settings').open = true;
    state.conversationId = sessionStorage.getItem(OPEN_CONVERSATION) || '';
  }

  $('save-settings').addEventListener('click', () => {
    state.user = $('user').value.trim() || state.user;
    localStorage.setItem(USER, state.user);
    $('settings').open = false;
    const key = $('api-key').value.trim();
    storeKey(key);
    page.useKey(key);
  });

  return { loadSettings, setConversation };
}
