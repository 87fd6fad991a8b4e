/**
 * Makes sure the namespace knows every search attribute the turn workflows set (core/protocol/workflow-contract.ts).
 * A workflow that upserts an unknown attribute fails its workflow task over and over (the turn hangs), so a
 * worker checks before it polls: missing attributes are registered, and a worker that cannot register them
 * refuses to start with the command an operator should run, instead of breaking turns later.
 */
import { SearchAttributeType } from '@temporalio/common';
// @temporalio/proto is CommonJS whose named exports Node's ESM loader cannot see: take the default export.
import proto from '@temporalio/proto';
import type { ConnectionLike } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { TURN_SEARCH_ATTRIBUTES, TURN_SEARCH_ATTRIBUTE_SPECS } from '../core/protocol/workflow-contract.js';

const { temporal } = proto;
const { IndexedValueType } = temporal.api.enums.v1;
/** The types our turn attributes use, as the operator API names them. */
const INDEXED_VALUE_TYPE = {
  [SearchAttributeType.KEYWORD]: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  [SearchAttributeType.KEYWORD_LIST]: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
} as const;

type WithOperator = Pick<ConnectionLike, 'operatorService'> | Pick<NativeConnection, 'operatorService'>;

/** Registers the turn search attributes the namespace lacks; returns the names it added. */
export async function ensureTurnSearchAttributes(connection: WithOperator, namespace: string): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.values(TURN_SEARCH_ATTRIBUTES).filter((k) => !customAttributes || !(k.name in customAttributes));
  if (missing.length === 0) return [];
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((k) => [k.name, INDEXED_VALUE_TYPE[k.type as keyof typeof INDEXED_VALUE_TYPE]])),
    });
  } catch (err) {
    const specs = TURN_SEARCH_ATTRIBUTE_SPECS.filter((s) => missing.some((k) => s.startsWith(`${k.name}=`)));
    throw new Error(
      `The Temporal namespace "${namespace}" lacks the search attributes ${missing.map((k) => k.name).join(', ')} and they could not be ` +
        `registered (${(err as Error).message}). Register them, then start the worker again:\n` +
        specs
          .map(
            (s) =>
              `  temporal operator search-attribute create --namespace ${namespace} --name ${s.split('=')[0]} --type ${s.split('=')[1]}`,
          )
          .join('\n'),
    );
  }
  return missing.map((k) => k.name);
}
