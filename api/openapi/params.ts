/** Shared by the OpenAPI builders (api/openapi/index.ts and its console parts). */
import { z } from 'zod';

type JsonSchema = Record<string, unknown>;

/** A zod object as OpenAPI query parameters (one per property). */
export function queryParams(schema: z.ZodObject): JsonSchema[] {
  const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, JsonSchema>;
    required?: string[];
  };
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: 'query',
    required: (js.required ?? []).includes(name),
    schema: s,
  }));
}

/** A required path parameter; a uuid unless `schema` says otherwise. */
export function pathParam(name: string, description: string, schema: JsonSchema = { type: 'string', format: 'uuid' }): JsonSchema {
  return { name, in: 'path', required: true, description, schema };
}

/** `{app_id}` of the console's per-app routes. */
export const appIdParam = pathParam('app_id', 'App id.');
