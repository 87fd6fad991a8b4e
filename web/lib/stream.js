// The one stream client of the pages: a turn's events over SSE (fetch + a small parser, since a turn starts with a
// POST), re-attached by Last-Event-ID when the connection breaks, until the turn's terminal event. An AbortSignal
// detaches (the turn goes on on the server; its history has the rest).

/** Yields `{id, event, data}` for each SSE frame of a fetch response. */
export async function* frames(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const raw = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const f = { id: undefined, event: undefined, data: '' };
        for (const line of raw.split('\n')) {
          if (line.startsWith('id:')) f.id = line.slice(3).trim();
          else if (line.startsWith('event:')) f.event = line.slice(6).trim();
          else if (line.startsWith('data:')) f.data += line.slice(5).trim();
        }
        if (f.data) yield { ...f, data: JSON.parse(f.data) };
      }
    }
  } finally {
    reader.releaseLock?.();
  }
}

const TERMINAL = new Set(['message_end', 'error']);

/**
 * Follows one turn: `res` is the first response (the POST's stream or an events GET), `reattach(lastId)` opens the
 * events again after a break, `onEvent(event, data)` sees every frame of the turn. `message_queued` (a message waiting
 * behind the turn in flight: its id and place in line, no event id) goes to `onQueued(data)` instead — it is no event
 * of the turn, which has not started. Resolves `{ended, aborted}`.
 */
export async function followTurn(res, { reattach, onEvent, onQueued, signal, attempts = 5 }) {
  let lastId = 0;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      for await (const f of frames(res)) {
        if (signal?.aborted) return { ended: false, aborted: true };
        if (f.id) lastId = Number(f.id);
        const event = f.event || f.data.event;
        if (event === 'message_queued') {
          onQueued?.(f.data);
          continue;
        }
        onEvent(event, f.data);
        if (TERMINAL.has(event)) return { ended: true, aborted: false };
      }
    } catch (err) {
      if (err.name === 'AbortError' || signal?.aborted) return { ended: false, aborted: true };
    }
    if (signal?.aborted) return { ended: false, aborted: true };
    if (!reattach) return { ended: false, aborted: false };
    try {
      res = await reattach(lastId);
    } catch (err) {
      if (err.name === 'AbortError' || signal?.aborted) return { ended: false, aborted: true };
      throw err;
    }
  }
  return { ended: false, aborted: false };
}
