declare module 'async-exit-hook' {
  interface ExitHook {
    (hook: (done?: () => void) => void): void;
    unhookEvent(event: string): void;
    hookedEvents(): string[];
    hookEvent(event: string, code?: number, filter?: (...args: unknown[]) => boolean): void;
  }
  const exitHook: ExitHook;
  export default exitHook;
}
