// The chat page's message list follows a streaming answer to its end unless the reader scrolled up (a wheel or touch
// move up, a key, the scrollbar dragged); reaching the end again resumes following, and "to latest" jumps back. Owns
// only the scroll position of the list and the to-latest button.

/** Wires `scroller` (the message list) and its `toLatest` button; returns `toBottom(force)`. */
export function followScroll(scroller, toLatest) {
  let follow = true;
  let lastTop = 0;
  const atBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
  // The reader's own moves up release the view at once (a smooth wheel scroll's first event is still near the bottom).
  const release = () => {
    follow = false;
  };
  scroller.addEventListener('wheel', (ev) => ev.deltaY < 0 && release(), { passive: true });
  scroller.addEventListener('touchmove', release, { passive: true });
  scroller.addEventListener('keydown', (ev) => ['PageUp', 'ArrowUp', 'Home'].includes(ev.key) && release());
  scroller.addEventListener('scroll', () => {
    // A move up away from the end (the scrollbar dragged) releases too; reaching the end again resumes following.
    if (scroller.scrollTop < lastTop - 2 && !atBottom()) follow = false;
    else if (scroller.scrollTop >= lastTop && atBottom()) follow = true;
    lastTop = scroller.scrollTop;
    toLatest.hidden = follow || atBottom();
  });
  /** To the end when following (or, with `force`, following again); otherwise only the to-latest button updates. */
  function toBottom(force = false) {
    if (force) follow = true;
    if (!follow) {
      toLatest.hidden = atBottom();
      return;
    }
    scroller.scrollTop = scroller.scrollHeight;
    lastTop = scroller.scrollTop;
    toLatest.hidden = true;
  }
  new MutationObserver(() => toBottom()).observe(scroller, { childList: true, subtree: true, characterData: true });
  toLatest.addEventListener('click', () => toBottom(true));
  return toBottom;
}
