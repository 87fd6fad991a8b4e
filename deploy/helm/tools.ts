/**
 * The tools the Helm chart's test needs (test/unit/helm.test.ts, docs/deploying.md "Kubernetes (Helm)"): `helm` and
 * `kubeconform`, built from the Go module proxy, and the Kubernetes JSON schemas kubeconform validates against,
 * from the PyPI package kubernetes-validate (it ships yannh/kubernetes-json-schema's files for Kubernetes 1.25-1.37;
 * there is no other offline source of them here). All three go into the project cache, `.cache/k8s-tools/`.
 *
 * Lookup order: HELM_PATH / KUBECONFORM_PATH / KUBERNETES_SCHEMA_DIR → the cache → (install) `go install` and
 * `pip download` into it (~4 min for both builds on two idle cores, once; Go's build cache keeps a rebuild short).
 * `npx tsx deploy/helm/tools.ts` installs and prints them (.ci/run does, before npm test).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HELM_VERSION = '3.22.0';
export const KUBECONFORM_VERSION = '0.8.0';
export const KUBERNETES_VALIDATE_VERSION = '1.37.0';
/** The Kubernetes versions the chart's output is validated against: the oldest the chart supports (Chart.yaml
 * kubeVersion: appArmorProfile is a field from 1.30) and the newest the schema package has. */
export const KUBERNETES_VERSIONS = ['1.30.0', '1.37.0'] as const;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const K8S_TOOLS_DIR = path.join(ROOT, '.cache', 'k8s-tools');
const BIN = path.join(K8S_TOOLS_DIR, `bin`);
const SCHEMA_ROOT = path.join(K8S_TOOLS_DIR, `kubernetes-json-schema-${KUBERNETES_VALIDATE_VERSION}`);

export interface K8sTools {
  helm: string;
  kubeconform: string;
  /** Holds `v<version>-local-strict/<kind>-<group>-<version>.json` (kubeconform's -schema-location template below). */
  schemaDir: string;
}

type Log = (msg: string) => void;

/** kubeconform's schema location for `schemaDir`: strict schemas (unknown fields are errors). */
export function schemaLocation(schemaDir: string): string {
  return path.join(schemaDir, '{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}', '{{ .ResourceKind }}{{ .KindSuffix }}.json');
}

function works(bin: string, args: string[], expect: string): boolean {
  try {
    const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 20_000 });
    return r.status === 0 && `${r.stdout}${r.stderr}`.includes(expect);
  } catch {
    return false;
  }
}

function goBinary(): string | undefined {
  const candidates = [
    process.env.GO_BIN,
    ...(process.env.PATH ?? '').split(path.delimiter).map((d) => d && path.join(d, 'go')),
    '/usr/local/go/bin/go',
  ];
  return candidates.find((c): c is string => !!c && fs.existsSync(c));
}

/** `go install` sets no version into either binary (helm says `v3.22`, kubeconform `development`): what was built is
 * recorded beside them. */
const STAMP = path.join(BIN, 'versions.json');
const wanted = { helm: HELM_VERSION, kubeconform: KUBECONFORM_VERSION };
function built(): Record<string, string> {
  try {
    return JSON.parse(fs.readFileSync(STAMP, 'utf8')) as Record<string, string>;
  } catch {
    return {};
  }
}
function stamp(name: keyof typeof wanted): void {
  fs.writeFileSync(STAMP, JSON.stringify({ ...built(), [name]: wanted[name] }, null, 2) + '\n');
}

function goInstall(pkg: string, log: Log): void {
  const go = goBinary();
  if (!go) throw new Error(`Go is needed to build ${pkg} (apt-get install golang-go, or set GO_BIN)`);
  log(`building ${pkg} from the Go module proxy into ${BIN} ...`);
  fs.mkdirSync(BIN, { recursive: true });
  const r = spawnSync(go, ['install', pkg], { env: { ...process.env, GOBIN: BIN }, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`go install ${pkg} failed (exit ${r.status ?? r.signal})`);
}

/** The wheel is a zip: the strict schemas of KUBERNETES_VERSIONS from its kubernetes-json-schema/ are what kubeconform reads. */
function fetchSchemas(log: Log): void {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'k8s-schemas-'));
  try {
    log(`pip download kubernetes-validate==${KUBERNETES_VALIDATE_VERSION} (the Kubernetes JSON schemas, 22 MB) ...`);
    const pip = spawnSync(
      'python3',
      ['-m', 'pip', 'download', '--no-deps', '-d', tmp, `kubernetes-validate==${KUBERNETES_VALIDATE_VERSION}`],
      {
        encoding: 'utf8',
      },
    );
    if (pip.status !== 0) throw new Error(`pip download kubernetes-validate failed: ${pip.stderr.trim().split('\n').slice(-2).join(' ')}`);
    const wheel = fs.readdirSync(tmp).find((f) => f.endsWith('.whl'));
    if (!wheel) throw new Error('pip download kubernetes-validate left no wheel');
    const prefix = 'kubernetes_validate/kubernetes-json-schema/';
    const wanted = KUBERNETES_VERSIONS.map((v) => `${prefix}v${v}-local-strict/`);
    // Its schemas carry `$id: https://kubernetes.io/api/...` and `$ref: /api/_definitions.json#...`, resolved against
    // those ids (the package preloads them); kubeconform resolves a $ref against the schema's file: without the ids,
    // each $ref becomes "_definitions.json#...", the file beside it.
    const extract = [
      'import json, os, sys, zipfile',
      'z = zipfile.ZipFile(sys.argv[1])',
      'for n in z.namelist():',
      '    if n.startswith(tuple(sys.argv[3:])) and n.endswith(".json"):',
      "        doc = json.loads(z.read(n).replace(b'\"/api/_definitions.json#', b'\"_definitions.json#'))",
      '        doc.pop("$id", None)',
      '        out = os.path.join(sys.argv[2], n)',
      '        os.makedirs(os.path.dirname(out), exist_ok=True)',
      '        json.dump(doc, open(out, "w"))',
    ].join('\n');
    const r = spawnSync('python3', ['-c', extract, path.join(tmp, wheel), tmp, ...wanted], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cannot unpack ${wheel}: ${r.stderr.trim()}`);
    fs.rmSync(SCHEMA_ROOT, { recursive: true, force: true });
    fs.mkdirSync(path.dirname(SCHEMA_ROOT), { recursive: true });
    fs.renameSync(path.join(tmp, prefix), SCHEMA_ROOT);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function schemasPresent(dir: string): boolean {
  return KUBERNETES_VERSIONS.every((v) => fs.existsSync(path.join(dir, `v${v}-local-strict`, 'deployment-apps-v1.json')));
}

/** Finds the tools, or (install) builds and fetches what is missing into the cache; else throws saying what is missing. */
export function locateK8sTools(opts: { install?: boolean; log?: Log } = {}): K8sTools {
  const log = opts.log ?? (() => undefined);
  const helm = process.env.HELM_PATH ?? path.join(BIN, 'helm');
  const kubeconform = process.env.KUBECONFORM_PATH ?? path.join(BIN, 'kubeconform');
  const schemaDir = process.env.KUBERNETES_SCHEMA_DIR ?? SCHEMA_ROOT;
  // A binary given by path is taken as it is; the cache's must be the version recorded when it was built.
  const helmOk = () => works(helm, ['version', '--short'], 'v3.') && (!!process.env.HELM_PATH || built().helm === HELM_VERSION);
  const kubeconformOk = () =>
    works(kubeconform, ['-v'], '') && (!!process.env.KUBECONFORM_PATH || built().kubeconform === KUBECONFORM_VERSION);
  if (opts.install) {
    if (!helmOk()) {
      goInstall(`helm.sh/helm/v3/cmd/helm@v${HELM_VERSION}`, log);
      stamp('helm');
    }
    if (!kubeconformOk()) {
      goInstall(`github.com/yannh/kubeconform/cmd/kubeconform@v${KUBECONFORM_VERSION}`, log);
      stamp('kubeconform');
    }
    if (!process.env.KUBERNETES_SCHEMA_DIR && !schemasPresent(schemaDir)) fetchSchemas(log);
  }
  const missing = [
    ...(helmOk() ? [] : [`helm ${HELM_VERSION} (${helm})`]),
    ...(kubeconformOk() ? [] : [`kubeconform ${KUBECONFORM_VERSION} (${kubeconform})`]),
    ...(schemasPresent(schemaDir) ? [] : [`the Kubernetes JSON schemas (${schemaDir})`]),
  ];
  if (missing.length) throw new Error(`missing: ${missing.join(', ')}; run \`npx tsx deploy/helm/tools.ts\` to build and fetch them`);
  return { helm, kubeconform, schemaDir };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  try {
    const t = locateK8sTools({ install: true, log: (m) => console.error(m) });
    console.log(`${t.helm}\n${t.kubeconform}\n${t.schemaDir}`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
