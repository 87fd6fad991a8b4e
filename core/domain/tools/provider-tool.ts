/** The cached tool list of a tool provider (tool_providers.tools): what the model is offered and how a call is made. */
import { z } from 'zod';
import { ToolName } from '../../protocol/tool-names.js';

export const ParamLocation = z.enum(['path', 'query', 'header', 'body']);
export type ParamLocation = z.infer<typeof ParamLocation>;

/** How an API tool's arguments become an HTTP request (from its OpenAPI operation). */
export const ApiOperation = z
  .object({
    method: z.enum(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']),
    /** The operation's path template, e.g. /forecast/{city}. */
    path: z.string(),
    /** Where each argument goes; `body` arguments are the JSON body's properties. */
    params: z.array(z.object({ name: z.string(), in: ParamLocation }).strict()),
    /** `flat`: the body's properties are top-level arguments; `whole`: the argument `body` is the body. */
    body: z.enum(['none', 'flat', 'whole']),
  })
  .strict();
export type ApiOperation = z.infer<typeof ApiOperation>;

export const ProviderTool = z
  .object({
    name: ToolName,
    description: z.string(),
    /** JSON schema of the arguments (an object schema). */
    parameters: z.record(z.string(), z.unknown()),
    operation: ApiOperation.optional(),
  })
  .strict();
export type ProviderTool = z.infer<typeof ProviderTool>;

export const ProviderTools = z.array(ProviderTool);
