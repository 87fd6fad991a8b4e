/**
 * core/platform/hot-sql.ts decodes rows by the column types it lists per model: they must be the Prisma schema's
 * (core/generated/dmmf.json, written by `prisma generate`), so a column added to the schema as DateTime, Decimal or
 * BigInt fails here until the hot statements decode it as Prisma would.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { HOT_MODELS, type HotModel } from '../../core/platform/hot-sql.js';

const DMMF = path.resolve(import.meta.dirname, '../../core/generated/dmmf.json');

interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: { name: string; kind: string; type: string; dbName?: string | null }[];
}

const models = (JSON.parse(fs.readFileSync(DMMF, 'utf8')) as { models: DmmfModel[] }).models;

describe('hot-sql column types', () => {
  it.each(Object.keys(HOT_MODELS) as HotModel[])('%s: the DateTime, Decimal and BigInt columns of the schema, no Bytes', (name) => {
    const model = models.find((m) => m.name === name);
    expect(model, `${name} in the schema`).toBeDefined();
    const scalars = model!.fields.filter((f) => f.kind === 'scalar' || f.kind === 'enum');
    // Rows are read as to_jsonb(row), whose keys are column names: the schema must map no field to another column.
    expect(scalars.filter((f) => f.dbName && f.dbName !== f.name)).toEqual([]);
    const of = (type: string) =>
      scalars
        .filter((f) => f.type === type)
        .map((f) => f.name)
        .sort();
    const listed = HOT_MODELS[name];
    expect({ DateTime: of('DateTime'), Decimal: of('Decimal'), BigInt: of('BigInt'), Bytes: of('Bytes') }).toEqual({
      DateTime: [...listed.DateTime].sort(),
      Decimal: [...listed.Decimal].sort(),
      BigInt: [...listed.BigInt].sort(),
      Bytes: [],
    });
  });
});
