/**
 * The migrated database matches the Prisma datamodel: every model's table, every column's type,
 * nullability and default, every primary key, unique, index and foreign key, and every enum — and
 * nothing more. Stands in for `prisma migrate diff`, which needs an engine binary we cannot fetch.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrations } from '../../core/platform/migrate.js';
import { freshDatabase } from '../support/db.js';

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: 'scalar' | 'object' | 'enum';
  type: string;
  isRequired: boolean;
  isList: boolean;
  isUnique: boolean;
  isId: boolean;
  hasDefaultValue: boolean;
  default?: unknown;
  nativeType?: [string, string[]] | null;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
  uniqueFields: string[][];
  primaryKey: { fields: string[] } | null;
}
interface Dmmf {
  models: DmmfModel[];
  enums: { name: string; values: { name: string }[] }[];
  indexes: { model: string; type: string; fields: { name: string; operatorClass?: string }[]; algorithm?: string }[];
}

const dmmf: Dmmf = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../core/generated/dmmf.json'), 'utf8'));
const table = (m: DmmfModel) => m.dbName ?? m.name;
const col = (f: DmmfField) => f.dbName ?? f.name;
const enumNames = new Set(dmmf.enums.map((e) => e.name));

/**
 * `Unsupported("…")` fields (e.g. a tsvector) are not in the DMMF: read them from the schema text, per mapped
 * table, as optional columns of that type.
 */
function unsupportedColumns(): Map<string, { column: string; type: string; required: boolean }[]> {
  const text = fs.readFileSync(path.resolve(import.meta.dirname, '../../prisma/schema.prisma'), 'utf8');
  const out = new Map<string, { column: string; type: string; required: boolean }[]>();
  for (const block of text.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)) {
    const body = block[2]!;
    const name = /@@map\("([^"]+)"\)/.exec(body)?.[1] ?? block[1]!;
    for (const f of body.matchAll(/^\s+(\w+)\s+Unsupported\("(\w+)"\)(\?)?/gm)) {
      out.set(name, [...(out.get(name) ?? []), { column: f[1]!, type: f[2]!, required: !f[3] }]);
    }
  }
  return out;
}
const unsupported = unsupportedColumns();

function expectedType(f: DmmfField): string {
  if (f.isList) return `_${expectedType({ ...f, isList: false })}`;
  if (enumNames.has(f.type)) return f.type;
  if (f.nativeType?.[0] === 'Real') return 'float4';
  const nt = f.nativeType;
  if (nt?.[0] === 'Uuid') return 'uuid';
  if (nt?.[0] === 'Timestamptz') return `timestamptz(${nt[1][0] ?? 6})`;
  if (nt?.[0] === 'Decimal') return `numeric(${nt[1].join(',')})`;
  const map: Record<string, string> = {
    String: 'text',
    Int: 'int4',
    BigInt: 'int8',
    Float: 'float8',
    Boolean: 'bool',
    Json: 'jsonb',
    Bytes: 'bytea',
    DateTime: 'timestamp(3)',
    Decimal: 'numeric(65,30)',
  };
  return map[f.type]!;
}

let client: pg.Client;
let url: string;

beforeAll(async () => {
  url = await freshDatabase('schema');
  client = new pg.Client({ connectionString: url });
  await client.connect();
});
afterAll(async () => client?.end());

async function columns(t: string) {
  const r = await client.query<{
    column_name: string;
    udt_name: string;
    is_nullable: string;
    column_default: string | null;
    numeric_precision: number | null;
    numeric_scale: number | null;
    datetime_precision: number | null;
  }>(
    `select column_name, udt_name, is_nullable, column_default, numeric_precision, numeric_scale, datetime_precision
       from information_schema.columns where table_schema = 'public' and table_name = $1`,
    [t],
  );
  return new Map(r.rows.map((c) => [c.column_name, c]));
}

function actualType(c: {
  udt_name: string;
  numeric_precision: number | null;
  numeric_scale: number | null;
  datetime_precision: number | null;
}): string {
  if (c.udt_name === 'timestamptz' || c.udt_name === 'timestamp') return `${c.udt_name}(${c.datetime_precision})`;
  if (c.udt_name === 'numeric') return `numeric(${c.numeric_precision},${c.numeric_scale})`;
  return c.udt_name;
}

async function indexes(t: string) {
  const r = await client.query<{ name: string; unique: boolean; primary: boolean; method: string; columns: string[]; opclasses: string[] }>(
    `select i.relname as name, ix.indisunique as unique, ix.indisprimary as primary, am.amname as method,
            array(select a.attname::text from unnest(ix.indkey) with ordinality k(attnum, ord)
                  join pg_attribute a on a.attrelid = t.oid and a.attnum = k.attnum order by k.ord) as columns,
            array(select case when oc.opcdefault then '' else oc.opcname::text end from unnest(ix.indclass) with ordinality c(oid, ord)
                  join pg_opclass oc on oc.oid = c.oid order by c.ord) as opclasses
       from pg_index ix join pg_class t on t.oid = ix.indrelid join pg_class i on i.oid = ix.indexrelid
       join pg_am am on am.oid = i.relam join pg_namespace n on n.oid = t.relnamespace
      where n.nspname = 'public' and t.relname = $1`,
    [t],
  );
  return r.rows;
}

describe('migrated database vs Prisma datamodel', () => {
  it('has exactly the tables of the datamodel (plus Prisma bookkeeping)', async () => {
    const r = await client.query<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
    );
    const actual = r.rows.map((x) => x.table_name).sort();
    expect(actual).toEqual([...dmmf.models.map(table), '_prisma_migrations'].sort());
  });

  it('has every enum with the same values', async () => {
    for (const e of dmmf.enums) {
      const r = await client.query<{ v: string }>(
        `select e.enumlabel as v from pg_enum e join pg_type t on t.oid = e.enumtypid where t.typname = $1 order by e.enumsortorder`,
        [e.name],
      );
      expect(
        r.rows.map((x) => x.v),
        e.name,
      ).toEqual(e.values.map((v) => v.name));
    }
  });

  for (const m of dmmf.models) {
    it(`${m.name}: columns, types, nullability, defaults`, async () => {
      const cols = await columns(table(m));
      const scalars = m.fields.filter((f) => f.kind !== 'object');
      const extra = unsupported.get(table(m)) ?? [];
      expect([...cols.keys()].sort(), 'column set').toEqual([...scalars.map(col), ...extra.map((e) => e.column)].sort());
      for (const e of extra) {
        expect(cols.get(e.column)!.udt_name, `${m.name}.${e.column} type`).toBe(e.type);
        expect(cols.get(e.column)!.is_nullable === 'NO', `${m.name}.${e.column} required`).toBe(e.required);
      }
      for (const f of scalars) {
        const c = cols.get(col(f))!;
        expect(actualType(c), `${m.name}.${f.name} type`).toBe(expectedType(f));
        // Prisma creates list columns without NOT NULL (its DMMF still calls them required).
        expect(c.is_nullable === 'NO', `${m.name}.${f.name} required`).toBe(f.isRequired && !f.isList);
        const dbDefault =
          f.hasDefaultValue &&
          !(typeof f.default === 'object' && f.default && ['uuid', 'cuid'].includes((f.default as { name: string }).name));
        expect(c.column_default !== null, `${m.name}.${f.name} has a database default`).toBe(dbDefault);
      }
    });

    it(`${m.name}: primary key, uniques and indexes`, async () => {
      const idx = await indexes(table(m));
      const pkCols = m.primaryKey?.fields ?? m.fields.filter((f) => f.isId).map(col);
      expect(idx.find((i) => i.primary)?.columns, 'primary key').toEqual(pkCols);
      const expectedUniques = [...m.fields.filter((f) => f.isUnique).map((f) => [col(f)]), ...m.uniqueFields].map((u) => u.join(','));
      const actualUniques = idx.filter((i) => i.unique && !i.primary).map((i) => i.columns.join(','));
      expect(actualUniques.sort(), 'unique indexes').toEqual(expectedUniques.sort());
      const expectedIdx = dmmf.indexes
        .filter((i) => i.model === m.name && i.type === 'normal')
        .map(
          (i) =>
            `${(i.algorithm ?? 'btree').toLowerCase()}:${i.fields.map((f) => f.name + (f.operatorClass ? `/${f.operatorClass}` : '')).join(',')}`,
        );
      const actualIdx = idx
        .filter((i) => !i.unique && !i.primary)
        .map(
          (i) =>
            `${i.method}:${i.columns.map((c, k) => c + (i.method !== 'btree' && i.opclasses[k] ? `/${i.opclasses[k]}` : '')).join(',')}`,
        );
      expect(actualIdx.sort(), 'indexes').toEqual(expectedIdx.sort());
    });

    it(`${m.name}: foreign keys`, async () => {
      const r = await client.query<{ columns: string[]; ref_table: string; ref_columns: string[]; on_delete: string }>(
        `select array(select a.attname::text from unnest(c.conkey) with ordinality k(n, o) join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.n order by k.o) as columns,
                rt.relname as ref_table,
                array(select a.attname::text from unnest(c.confkey) with ordinality k(n, o) join pg_attribute a on a.attrelid = c.confrelid and a.attnum = k.n order by k.o) as ref_columns,
                c.confdeltype as on_delete
           from pg_constraint c join pg_class t on t.oid = c.conrelid join pg_class rt on rt.oid = c.confrelid
          where c.contype = 'f' and t.relname = $1`,
        [table(m)],
      );
      const actions: Record<string, string> = { c: 'Cascade', n: 'SetNull', r: 'Restrict', a: 'NoAction', d: 'SetDefault' };
      const actual = r.rows.map((x) => `${x.columns.join(',')}->${x.ref_table}(${x.ref_columns.join(',')}) ${actions[x.on_delete]}`).sort();
      const models = new Map(dmmf.models.map((mm) => [mm.name, mm]));
      const expected = m.fields
        .filter((f) => f.kind === 'object' && f.relationFromFields?.length)
        .map(
          (f) =>
            `${f.relationFromFields!.join(',')}->${table(models.get(f.type)!)}(${f.relationToFields!.join(',')}) ${f.relationOnDelete ?? (f.isRequired ? 'Restrict' : 'SetNull')}`,
        )
        .sort();
      expect(actual).toEqual(expected);
    });
  }

  it('keeps Prisma bookkeeping and re-applying is a no-op', async () => {
    const r = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      'select migration_name, checksum, finished_at from _prisma_migrations',
    );
    const dirs = fs.readdirSync(path.resolve(import.meta.dirname, '../../prisma/migrations')).filter((d) => /^\d+_/.test(d));
    expect(r.rows.map((x) => x.migration_name).sort()).toEqual(dirs.sort());
    expect(r.rows.every((x) => x.finished_at !== null && /^[0-9a-f]{64}$/.test(x.checksum))).toBe(true);
    const again = await applyMigrations(url);
    expect(again.applied).toEqual([]);
  });
});
