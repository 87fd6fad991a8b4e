/** A problem found in an AgentSoulConfig: where (the config path, as the console's 400 names it) and what. */
export interface SoulIssue {
  path: (string | number)[];
  message: string;
}

export const formatSoulPath = (path: (string | number)[]): string =>
  path.reduce<string>((s, p) => (typeof p === 'number' ? `${s}[${p}]` : s ? `${s}.${p}` : p), '');
