/**
 * The Helm chart (deploy/helm/dify-agent, issue 44 item 4; docs/deploying.md "Kubernetes (Helm)"): `helm lint`,
 * `helm template` with the default and a production-like values file (ci/production-values.yaml), every rendered
 * object validated by kubeconform against the Kubernetes JSON schemas (strict: an unknown field is an error) of the
 * oldest and newest Kubernetes the chart supports, and the deployment's rules on the result: probes on the ports
 * each service serves, secrets only as files, the sandbox's security settings on the agent backend alone, and an
 * environment the app's own config module accepts in production. The tools come from deploy/helm/tools.ts; outside
 * CI a machine without them skips this file saying so, in CI their absence fails it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'pg-connection-string';
import { afterAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { loadConfig, SECRET_VARS } from '../../core/platform/config.js';
import { TURN_SEARCH_ATTRIBUTE_SPECS } from '../../core/protocol/workflow-contract.js';
import { KUBERNETES_VERSIONS, locateK8sTools, schemaLocation, type K8sTools } from '../../deploy/helm/tools.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy', 'helm', 'dify-agent');
const PRODUCTION = path.join(CHART, 'ci', 'production-values.yaml');

function tools(): K8sTools | null {
  try {
    return locateK8sTools();
  } catch (err) {
    if (process.env.CI) throw err; // .ci/run builds them first (npx tsx deploy/helm/tools.ts)
    console.warn(`helm.test.ts skipped: ${(err as Error).message}`);
    return null;
  }
}
const t = tools();

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- read by path below
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function helm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(t!.helm, args, {
    encoding: 'utf8',
    timeout: 60_000,
    // No repositories, no plugins, no cache of the user's: the chart has no dependencies to fetch.
    env: {
      ...process.env,
      HELM_CACHE_HOME: path.join(tmp, 'cache'),
      HELM_CONFIG_HOME: path.join(tmp, 'config'),
      HELM_DATA_HOME: path.join(tmp, 'data'),
    },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `helm template` as for a cluster of `kubeVersion` (helm's own default, 1.20, is below the chart's kubeVersion). */
function render(
  valuesFiles: string[] = [],
  set: string[] = [],
  kubeVersion: string = KUBERNETES_VERSIONS[0],
): { yaml: string; objects: K8sObject[] } {
  const r = helm([
    'template',
    'agents',
    CHART,
    '--namespace',
    'dify',
    '--kube-version',
    kubeVersion,
    ...valuesFiles.flatMap((f) => ['-f', f]),
    ...set.flatMap((s) => ['--set', s]),
  ]);
  expect(r.stderr, 'helm template').toBe('');
  expect(r.status).toBe(0);
  const objects = YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
  return { yaml: r.stdout, objects };
}

function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in ${objects.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`);
  return o;
}

const ROLES = {
  api: { script: 'dist/api/main.js', portVar: 'API_PORT' },
  worker: { script: 'dist/worker.js', portVar: 'WORKER_HEALTH_PORT' },
  'agent-backend': { script: 'dist/agent-backend/main.js', portVar: 'AGENT_BACKEND_PORT' },
} as const;

describe.runIf(t)('the Helm chart (deploy/helm/dify-agent)', () => {
  const defaults = t ? render() : { yaml: '', objects: [] };
  const production = t ? render([PRODUCTION]) : { yaml: '', objects: [] };

  it('passes helm lint --strict with the default and the production-like values', () => {
    for (const values of [[], ['-f', PRODUCTION]]) {
      const r = helm(['lint', '--strict', CHART, ...values]);
      expect(`${r.stdout}${r.stderr}`, values.join(' ') || 'defaults').toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
      expect(r.status).toBe(0);
    }
  });

  it.each(
    KUBERNETES_VERSIONS.flatMap((v) => [
      ['defaults', v],
      ['production', v],
    ]),
  )('every rendered object (%s values) is valid against the Kubernetes %s schemas (kubeconform -strict)', (which, version) => {
    const { yaml, objects } = render(which === 'defaults' ? [] : [PRODUCTION], [], version);
    const file = path.join(tmp, `${which}-${version}.yaml`);
    fs.writeFileSync(file, yaml);
    const r = spawnSync(
      t!.kubeconform,
      ['-strict', '-summary', '-output', 'json', '-kubernetes-version', version, '-schema-location', schemaLocation(t!.schemaDir), file],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const out = JSON.parse(r.stdout) as {
      resources: { kind: string; name: string; status: string; msg: string }[];
      summary: Record<string, number>;
    };
    expect(out.resources.filter((x) => x.status !== 'statusValid')).toEqual([]);
    // Nothing skipped for want of a schema: every object was checked.
    expect(out.summary).toEqual({ valid: objects.length, invalid: 0, errors: 0, skipped: 0 });
    expect(r.status).toBe(0);
  });

  it('renders the three roles, their Services, disruption budgets, autoscalers for the api and worker, and the jobs', () => {
    const names = defaults.objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(names).toEqual(
      [
        'Deployment/agents-dify-agent-api',
        'Deployment/agents-dify-agent-worker',
        'Deployment/agents-dify-agent-agent-backend',
        'Service/agents-dify-agent-api',
        'Service/agents-dify-agent-agent-backend',
        'PodDisruptionBudget/agents-dify-agent-api',
        'PodDisruptionBudget/agents-dify-agent-worker',
        'PodDisruptionBudget/agents-dify-agent-agent-backend',
        'HorizontalPodAutoscaler/agents-dify-agent-api',
        'HorizontalPodAutoscaler/agents-dify-agent-worker',
        'Job/agents-dify-agent-migrate',
        'Job/agents-dify-agent-temporal-setup',
        'PersistentVolumeClaim/agents-dify-agent-data',
        'ServiceAccount/agents-dify-agent',
      ].sort(),
    );
    // The chart never holds a secret value.
    expect(production.objects.filter((o) => o.kind === 'Secret')).toEqual([]);
  });

  it('points every selector (Services, budgets, autoscalers) at its own role’s pods', () => {
    for (const role of Object.keys(ROLES)) {
      const d = find(defaults.objects, 'Deployment', `agents-dify-agent-${role}`);
      const podLabels = d.spec!.template.metadata.labels as Record<string, string>;
      expect(d.spec!.selector.matchLabels).toEqual(podLabels);
      expect(podLabels['app.kubernetes.io/component']).toBe(role);
      const pdb = find(defaults.objects, 'PodDisruptionBudget', `agents-dify-agent-${role}`);
      expect(pdb.spec!.selector.matchLabels).toEqual(podLabels);
      if (role !== 'worker') expect(find(defaults.objects, 'Service', `agents-dify-agent-${role}`).spec!.selector).toEqual(podLabels);
      if (role !== 'agent-backend') {
        const hpa = find(defaults.objects, 'HorizontalPodAutoscaler', `agents-dify-agent-${role}`);
        expect(hpa.spec!.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name });
        expect(d.spec!.replicas, 'the autoscaler owns the replica count').toBeUndefined();
      }
    }
  });

  it('probes /healthz (liveness) and /readyz (readiness) on the port each role serves them on', () => {
    for (const [role, { script, portVar }] of Object.entries(ROLES)) {
      const c = find(defaults.objects, 'Deployment', `agents-dify-agent-${role}`).spec!.template.spec.containers[0];
      expect(c.command).toEqual(['node', script]);
      const port = Number((c.env as EnvVar[]).find((e) => e.name === portVar)!.value);
      expect(c.ports).toEqual([{ name: 'http', containerPort: port }]);
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
      expect(c.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
      expect(c.resources.limits.memory).toEqual(expect.any(String));
    }
  });

  it('runs the migration as a hook before install and upgrade, and registers the turn search attributes after', () => {
    const migrate = find(defaults.objects, 'Job', 'agents-dify-agent-migrate');
    expect(migrate.metadata.annotations!['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(migrate.spec!.template.spec.containers[0].command).toEqual(['node', 'dist/scripts/migrate.js']);
    const setup = find(defaults.objects, 'Job', 'agents-dify-agent-temporal-setup');
    expect(setup.metadata.annotations!['helm.sh/hook']).toBe('post-install,post-upgrade');
    const script = setup.spec!.template.spec.containers[0].args[0] as string;
    expect(/for a in ([^;]+); do/.exec(script)![1]!.trim().split(/\s+/)).toEqual(TURN_SEARCH_ATTRIBUTE_SPECS);
    // Temporal Cloud: no setup job (namespaces and attributes are made with tcld).
    expect(production.objects.filter((o) => o.metadata.name.endsWith('temporal-setup'))).toEqual([]);
  });

  it('takes every secret from a file of a mounted Secret, none from a value in the chart', () => {
    for (const { objects } of [defaults, production])
      for (const o of objects.filter((x) => x.kind === 'Deployment' || x.metadata.name.endsWith('-migrate'))) {
        const pod = o.spec!.template.spec;
        const c = pod.containers[0];
        const env = c.env as EnvVar[];
        for (const v of [...SECRET_VARS, 'DATABASE_PASSWORD', 'SHELLCTL_AUTH_TOKEN', 'TEMPORAL_API_KEY'])
          expect(
            env.find((e) => e.name === v),
            `${o.metadata.name}: ${v} inline`,
          ).toBeUndefined();
        const mounts = c.volumeMounts as { name: string; mountPath: string }[];
        for (const e of env.filter((x) => x.name.endsWith('_FILE'))) {
          const mount = mounts.find((m) => e.value!.startsWith(`${m.mountPath}/`));
          expect(mount, `${o.metadata.name}: ${e.name}=${e.value} is under a mount`).toBeDefined();
          const volume = (pod.volumes as { name: string; secret?: { secretName: string } }[]).find((v) => v.name === mount!.name);
          expect(volume?.secret?.secretName, `${o.metadata.name}: ${e.name} comes from a Secret`).toBeTruthy();
        }
      }
  });

  it('gives an environment the app’s config accepts in production, with the Services’ addresses and the password in the URL', () => {
    // The Secret's files, as Kubernetes would mount them.
    const secretDir = path.join(tmp, 'secrets');
    fs.mkdirSync(secretDir, { recursive: true });
    const content: Record<string, string> = {
      inner_api_key: 'inner-0123456789abcdef',
      agent_backend_token: 'backend-0123456789abcdef',
      execution_context_signing_key: 'signing-0123456789abcdef',
      encryption_key: 'e'.repeat(64),
      shellctl_auth_token: 'shellctl-0123456789abcdef',
      postgres_password: 'pa ss@w/rd%',
    };
    for (const [k, v] of Object.entries(content)) fs.writeFileSync(path.join(secretDir, k), `${v}\n`);
    const caFile = path.join(tmp, 'ca.crt');
    fs.writeFileSync(caFile, 'a CA\n');
    for (const [role] of Object.entries(ROLES)) {
      const c = find(production.objects, 'Deployment', `agents-dify-agent-${role}`).spec!.template.spec.containers[0];
      const env = Object.fromEntries(
        (c.env as EnvVar[]).map((e) => [e.name, (e.value ?? '').replace(/^\/run\/secrets\/dify-agent\//, `${secretDir}/`)]),
      );
      // Files of other Secrets (the PostgreSQL CA, Temporal's client certificate, S3 keys) are only read when connecting.
      for (const k of Object.keys(env)) if (k.endsWith('_FILE') && env[k]!.startsWith('/run/secrets/')) delete env[k];
      const config = loadConfig(env);
      expect(config.NODE_ENV).toBe('production');
      // node-postgres reads sslrootcert when it parses the URL: the mounted CA's path, here this test's file.
      const url = new URL(config.DATABASE_URL!);
      expect(url.searchParams.get('sslrootcert')).toBe('/run/secrets/postgresql-ca/ca.crt');
      url.searchParams.set('sslrootcert', caFile);
      expect(parse(url.toString())).toMatchObject({
        user: 'dify_app',
        password: content.postgres_password,
        host: 'db.internal.example.com',
        port: '5432',
        database: 'dify_agent',
        ssl: { ca: 'a CA\n' },
      });
      expect(config.agentBackendUrl).toBe('http://agents-dify-agent-agent-backend:5002');
      expect(config.TEMPORAL_ADDRESS).toBe('prod.a1b2c.tmprl.cloud:7233');
      if (role === 'agent-backend') expect(config.apiUrl).toBe('http://agents-dify-agent-api:5001');
      if (role === 'api') expect(config.apiUrl).toBe('https://agents.example.com');
      expect(config.INNER_API_KEY).toBe(content.inner_api_key);
    }
  });

  it('with objectStorage on, every role runs WORKSPACE_STORE=s3 on the bucket’s settings (keys from their own Secret) and the agent backend mounts no shared volume', () => {
    const secretDir = path.join(tmp, 's3-secrets');
    const keyDir = path.join(tmp, 's3-keys');
    fs.mkdirSync(secretDir, { recursive: true });
    fs.mkdirSync(keyDir, { recursive: true });
    for (const k of ['inner_api_key', 'agent_backend_token', 'execution_context_signing_key', 'shellctl_auth_token', 'postgres_password'])
      fs.writeFileSync(path.join(secretDir, k), `${k}-0123456789abcdef\n`);
    fs.writeFileSync(path.join(secretDir, 'encryption_key'), `${'e'.repeat(64)}\n`);
    fs.writeFileSync(path.join(keyDir, 'access_key_id'), 'AKIAEXAMPLE\n');
    fs.writeFileSync(path.join(keyDir, 'secret_access_key'), 'secret-example\n');
    for (const role of Object.keys(ROLES)) {
      const pod = find(production.objects, 'Deployment', `agents-dify-agent-${role}`).spec!.template.spec;
      const env = Object.fromEntries(
        (pod.containers[0].env as EnvVar[]).map((e) => [
          e.name,
          (e.value ?? '')
            .replace(/^\/run\/secrets\/dify-agent\//, `${secretDir}/`)
            .replace(/^\/run\/secrets\/object-storage\//, `${keyDir}/`),
        ]),
      );
      for (const k of Object.keys(env)) if (k.endsWith('_FILE') && env[k]!.startsWith('/run/secrets/')) delete env[k];
      const config = loadConfig(env);
      expect(config, role).toMatchObject({
        WORKSPACE_STORE: 's3',
        S3_BUCKET: 'dify-agent-workspaces',
        S3_PREFIX: 'workspaces/',
        S3_REGION: 'eu-west-1',
        S3_ENDPOINT: 'https://s3.eu-west-1.amazonaws.com',
        S3_FORCE_PATH_STYLE: false,
        S3_ACCESS_KEY_ID: 'AKIAEXAMPLE',
        S3_SECRET_ACCESS_KEY: 'secret-example',
      });
      const volumes = pod.volumes as { name: string; persistentVolumeClaim?: unknown; emptyDir?: unknown }[];
      const data = volumes.find((v) => v.name === 'data')!;
      // The backend's /data is its own; the api and the worker still share the claim: uploads live in /data/uploads.
      if (role === 'agent-backend') {
        expect(volumes.filter((v) => v.persistentVolumeClaim)).toEqual([]);
        expect(data.emptyDir).toEqual({});
      } else expect(data.persistentVolumeClaim).toEqual({ claimName: 'agents-dify-agent-data' });
    }
    // Without object storage the backend shares the claim as before; its local data can be capped.
    const d = find(defaults.objects, 'Deployment', 'agents-dify-agent-agent-backend').spec!.template.spec;
    expect(d.volumes.find((v: { name: string }) => v.name === 'data').persistentVolumeClaim).toEqual({
      claimName: 'agents-dify-agent-data',
    });
    const capped = render([PRODUCTION], ['agentBackend.localData.sizeLimit=20Gi']);
    const c = find(capped.objects, 'Deployment', 'agents-dify-agent-agent-backend').spec!.template.spec;
    expect(c.volumes.find((v: { name: string }) => v.name === 'data').emptyDir).toEqual({ sizeLimit: '20Gi' });
  });

  it('runs every pod as non-root without privilege escalation; only the agent backend has the sandbox’s Unconfined profiles', () => {
    for (const o of defaults.objects.filter((x) => x.kind === 'Deployment' || x.kind === 'Job')) {
      const pod = o.spec!.template.spec;
      expect(pod.securityContext.runAsNonRoot, o.metadata.name).toBe(true);
      expect(pod.automountServiceAccountToken, o.metadata.name).toBe(false);
      const sc = pod.containers[0].securityContext;
      expect(sc).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: true });
      if (o.metadata.name.endsWith('agent-backend'))
        expect(sc).toMatchObject({ seccompProfile: { type: 'Unconfined' }, appArmorProfile: { type: 'Unconfined' } });
      else {
        expect(sc.seccompProfile, o.metadata.name).toEqual({ type: 'RuntimeDefault' });
        expect(sc.appArmorProfile, o.metadata.name).toBeUndefined();
      }
    }
    // Sandbox off: the backend keeps the defaults (its shell is then refused, naming what is missing).
    const off = render([], ['agentBackend.sandbox.enabled=false']);
    const sc = find(off.objects, 'Deployment', 'agents-dify-agent-agent-backend').spec!.template.spec.containers[0].securityContext;
    expect(sc.seccompProfile).toEqual({ type: 'RuntimeDefault' });
  });

  it('refuses values its schema does not allow, naming the value', () => {
    const cases: [string[], RegExp][] = [
      [['temporal.address='], /\/temporal\/address/],
      [['postgresql.sslmode=require'], /\/postgresql\/sslmode/],
      [['secrets.existingSecret='], /\/secrets\/existingSecret/],
      [['objectStorage.enabled=true'], /\/objectStorage\/bucket/],
      [['objectStorage.prefix=prod'], /\/objectStorage\/prefix/],
      [['temporal.tls.mtls=true'], /\/temporal\/tls/],
      [['api.autoscaling.targetCPUUtilizationPercentage=0'], /targetCPUUtilizationPercentage/],
      [['apii.replicas=3'], /apii/],
    ];
    for (const [set, message] of cases) {
      const r = helm(['template', 'agents', CHART, '--kube-version', KUBERNETES_VERSIONS[0], ...set.flatMap((s) => ['--set', s])]);
      expect(r.status, set.join(' ')).not.toBe(0);
      expect(r.stderr, set.join(' ')).toMatch(/values don't meet the specifications of the schema/);
      expect(r.stderr, set.join(' ')).toMatch(message);
    }
  });
});
