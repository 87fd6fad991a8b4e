/**
 * The console's side of soul validation (core/domain/soul-validation.ts): a config that cannot run is a 400
 * `invalid_agent_config` whose message names the field (`tools.core[0]: …`, or an unknown prompt mention) and whose `issues` list every
 * problem as `{path, message}`, so an editor can mark each field. Nothing is saved or published then.
 */
import { formatSoulPath, type SoulIssue } from '../../core/domain/soul-issues.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { mentionIssues } from '../../core/domain/mention-resolver.js';
import {
  describeSoulIssues,
  parseSoul,
  validateSoul,
  type SoulValidationDeps,
  type SoulValidationInput,
} from '../../core/domain/soul-validation.js';
import { HttpError } from '../errors.js';

export function invalidAgentConfig(issues: SoulIssue[]): HttpError {
  const listed = issues.map((i) => ({ path: formatSoulPath(i.path), message: i.message }));
  return new HttpError(400, 'invalid_agent_config', describeSoulIssues(issues), { issues: listed });
}

/** The config parsed, once every check passed; else the 400 above. */
export async function validatedSoul(
  deps: SoulValidationDeps & { signingKeyIsDefault?: boolean },
  input: SoulValidationInput,
): Promise<AgentSoulConfig> {
  const issues = await validateSoul(deps, input);
  // The api authorizes no workspace while EXECUTION_CONTEXT_SIGNING_KEY is the public default (issue 27).
  if (deps.signingKeyIsDefault && parseSoul(input.soul).soul?.runtime.enabled)
    issues.push({
      path: ['runtime'],
      message:
        'EXECUTION_CONTEXT_SIGNING_KEY holds its public development default, so no workspace is authorized: set your own (npm start generates it into DATA_DIR/secrets.json)',
    });
  // A prompt mention the turn's resolver would not understand (issue 31): named, and nothing is saved.
  const parsed = parseSoul(input.soul);
  if (parsed.soul) issues.push(...mentionIssues(parsed.soul));
  if (issues.length) throw invalidAgentConfig(issues);
  return AgentSoulConfig.parse(input.soul);
}
