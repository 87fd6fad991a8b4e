/** The turn's search attributes are defined once (core/protocol/workflow-contract.ts); every registrar must agree. */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TURN_SEARCH_ATTRIBUTE_SPECS } from '../../core/protocol/workflow-contract.js';

describe('turn search attributes', () => {
  it('docker-compose registers exactly the attributes the workflows are started with', () => {
    const compose = fs.readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
    const loop = /for a in ([A-Za-z= ]+); do/.exec(compose);
    expect(loop, 'the search-attribute registration loop in docker-compose.yml').not.toBeNull();
    expect(loop![1]!.trim().split(/\s+/)).toEqual(TURN_SEARCH_ATTRIBUTE_SPECS);
  });
});
