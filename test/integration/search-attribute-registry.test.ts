/**
 * A worker registers the turn search attributes a namespace lacks before it polls: a namespace without one
 * would refuse every turn start (the api sets them all) — e.g. a cluster upgraded to a release that added one.
 */
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureTurnSearchAttributes } from '../../worker/search-attribute-registry.js';
import { TURN_SEARCH_ATTRIBUTE_NAMES } from '../../core/protocol/workflow-contract.js';

let connection: Connection;
const namespace = `sa-registry-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  connection = await Connection.connect({ address: inject('temporalAddress') });
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
});
afterAll(async () => connection?.close());

describe('turn search attribute registry', () => {
  it('adds every missing attribute to a bare namespace, then finds nothing to add', async () => {
    // A just-registered namespace can take a moment to be served.
    let added: string[] | null = null;
    for (let i = 0; i < 50 && added === null; i++) {
      added = await ensureTurnSearchAttributes(connection, namespace).catch(async () => {
        await new Promise((r) => setTimeout(r, 200));
        return null;
      });
    }
    expect(added?.sort()).toEqual([...TURN_SEARCH_ATTRIBUTE_NAMES].sort());
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
    expect(Object.keys(customAttributes ?? {})).toEqual(expect.arrayContaining(TURN_SEARCH_ATTRIBUTE_NAMES));
    expect(await ensureTurnSearchAttributes(connection, namespace)).toEqual([]);
  });
});
