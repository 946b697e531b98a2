/**
 * deploy/kubernetes: every overlay rendered (test/helpers/kustomize.ts; and by `kubectl kustomize` where kubectl is on
 * the PATH, which must give the same objects), every object validated against the Kubernetes API schemas
 * (kubernetes-models: types, required fields, enumerations; unknown fields are not flagged by those schemas, so the
 * fields that matter are asserted below), the references between objects resolved, and the services' own
 * configuration files parsed by the services' own parsers.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/gateway/config.ts';
import { PrometheusMetrics, type MetricsSource } from '../../src/serve/metrics/prometheus/index.ts';
import { parseToolsConfig } from '../../src/tools/config.ts';
import { renderKustomization, type KubernetesObject } from '../helpers/kustomize.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const root = path.join(repoRoot, 'deploy', 'kubernetes');
const overlays = ['production', 'queue-autoscaling', 'development'];
const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } } }[];
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: { httpGet?: { path: string; port: string } };
  readinessProbe?: { httpGet?: { path: string; port: string } };
  startupProbe?: { httpGet?: { path: string; port: string } };
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
  containers: Container[];
  volumes?: { name: string; configMap?: { name: string } }[];
}
type Workload = KubernetesObject & { spec: { replicas?: number; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };

const find = (objects: KubernetesObject[], kind: string, name: string) => objects.find((object) => object.kind === kind && object.metadata.name === name);
const workload = (objects: KubernetesObject[], name: string) => find(objects, 'Deployment', name) as Workload;
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([key, value]) => labels[key] === value);
const key = (object: KubernetesObject) => `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;

/** The model class of an object's apiVersion and kind (kubernetes-models/apps/v1/Deployment, kubernetes-models/v1/Service). */
async function validate(object: KubernetesObject): Promise<void> {
  const module = (await import(/* @vite-ignore */ `kubernetes-models/${object.apiVersion}/${object.kind}`)) as Record<string, new (data: object) => { validate(): void }>;
  new module[object.kind](object).validate();
}

describe.each(overlays)('deploy/kubernetes/overlays/%s', (overlay) => {
  const objects = renderKustomization(path.join(root, 'overlays', overlay));
  const namespace = objects.find((object) => object.kind === 'Namespace')?.metadata.name;

  it('renders the three services, each object valid against the Kubernetes schemas', async () => {
    expect(objects.map(key)).toEqual(expect.arrayContaining([`Deployment/${namespace}/model-server`, `Deployment/${namespace}/gateway`, `Deployment/${namespace}/tools`]));
    for (const object of objects) {
      await expect(validate(object).then(() => 'valid'), key(object)).resolves.toBe('valid');
      if (object.kind !== 'Namespace') expect(object.metadata.namespace, key(object)).toBe(namespace);
    }
    // the schemas catch a wrong type: the check is not vacuous
    const broken = structuredClone(workload(objects, 'gateway'));
    (broken.spec as { replicas: unknown }).replicas = 'three';
    await expect(validate(broken)).rejects.toThrow(/replicas must be integer/);
  });

  it.skipIf(!kubectl)('renders the same objects as kubectl kustomize', () => {
    const rendered = spawnSync('kubectl', ['kustomize', path.join(root, 'overlays', overlay)], { encoding: 'utf8' });
    expect(rendered.status, rendered.stderr).toBe(0);
    const theirs = parseAllDocuments(rendered.stdout).map((document) => document.toJSON() as KubernetesObject);
    const byKey = (list: KubernetesObject[]) => Object.fromEntries(list.map((object) => [key(object), object]));
    expect(byKey(objects)).toEqual(byKey(theirs));
  });

  it('runs every encoder-sea pod non-root on a read-only root file system, without capabilities', () => {
    for (const name of ['model-server', 'gateway', 'tools']) {
      const pod = workload(objects, name).spec.template.spec;
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
      for (const container of pod.containers) {
        expect(container.image).toMatch(/encoder-sea\/[a-z-]+:\d+\.\d+\.\d+$/);
        expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        expect(container.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
      }
    }
  });

  it('probes the model server on /livez and /health and lets its drain end before the kill', () => {
    const pod = workload(objects, 'model-server').spec.template.spec;
    const [container] = pod.containers;
    expect(container.args?.[0]).toBe('serve');
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/livez', port: 'http' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(container.startupProbe?.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(container.ports).toContainEqual({ name: 'http', containerPort: 8080 });
    const option = (name: string) => Number(container.args?.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1]);
    expect(option('shutdown-grace')).toBeLessThan(option('shutdown-timeout'));
    // docs/http-api.md, "Shutdown": terminationGracePeriodSeconds ≥ shutdown timeout + 5 s
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(option('shutdown-timeout') / 1000 + 5);
    expect(option('http-port')).toBe(8080);
  });

  it('gives the gateway and the tool server a preStop pause and their secrets from Secrets', () => {
    for (const name of ['gateway', 'tools']) {
      const [container] = workload(objects, name).spec.template.spec.containers;
      expect(container.lifecycle?.preStop?.sleep?.seconds).toBeGreaterThanOrEqual(5);
      for (const variable of container.env ?? []) expect(variable.value, `${name} ${variable.name} must come from a Secret`).toBeUndefined();
    }
    const env = Object.fromEntries((workload(objects, 'gateway').spec.template.spec.containers[0].env ?? []).map((variable) => [variable.name, variable.valueFrom?.secretKeyRef]));
    expect(env.GATEWAY_MASTER_KEY).toEqual({ name: 'gateway', key: 'master-key' });
    expect(env.GATEWAY_DATABASE_URL).toEqual({ name: 'gateway', key: 'database-url' });
    expect(workload(objects, 'gateway').spec.replicas).toBeGreaterThanOrEqual(overlay === 'development' ? 1 : 2);
  });

  it('parses the gateway.yaml and tools.yaml of its ConfigMaps with the services’ own parsers, every ${NAME} set by the container', () => {
    for (const [name, file] of [['gateway', 'gateway.yaml'], ['tools', 'tools.yaml']]) {
      const pod = workload(objects, name).spec.template.spec;
      const configMap = pod.volumes?.find((volume) => volume.configMap)?.configMap?.name;
      const text = (find(objects, 'ConfigMap', configMap!) as unknown as { data: Record<string, string> }).data[file];
      expect(pod.containers[0].args).toContain(`/etc/encoder/${file}`);
      // what the Secret would hold: a digest where tools.yaml wants one, any text elsewhere
      const env = Object.fromEntries((pod.containers[0].env ?? []).map((variable) => [variable.name, variable.name.endsWith('SHA256') ? 'ab'.repeat(32) : 'from-a-secret']));
      const parsed = name === 'gateway' ? parseConfigText(text, file, env) : parseToolsConfig(text, file, env);
      expect(parsed).toBeTruthy();
    }
  });

  it('resolves every reference: Services, HPA, PDBs and Secrets of the development overlay', () => {
    const workloads = objects.filter((object) => object.kind === 'Deployment' || object.kind === 'StatefulSet') as Workload[];
    for (const service of objects.filter((object) => object.kind === 'Service') as (KubernetesObject & { spec: { selector: Record<string, string>; ports: { targetPort: string }[] } })[]) {
      const backing = workloads.find((candidate) => selects(service.spec.selector, candidate.spec.template.metadata.labels));
      expect(backing, key(service)).toBeDefined();
      for (const port of service.spec.ports) expect(backing!.spec.template.spec.containers.flatMap((container) => container.ports?.map((p) => p.name))).toContain(port.targetPort);
    }
    for (const budget of objects.filter((object) => object.kind === 'PodDisruptionBudget') as (KubernetesObject & { spec: { selector: { matchLabels: Record<string, string> } } })[]) {
      expect(workloads.some((candidate) => selects(budget.spec.selector.matchLabels, candidate.spec.template.metadata.labels)), key(budget)).toBe(true);
    }
    const hpa = find(objects, 'HorizontalPodAutoscaler', 'model-server') as KubernetesObject & { spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number; maxReplicas: number } };
    expect(find(objects, hpa.spec.scaleTargetRef.kind, hpa.spec.scaleTargetRef.name)).toBeDefined();
    expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
    if (overlay !== 'development') return; // elsewhere the Secrets are made by whoever deploys (docs/deploying.md)
    for (const candidate of workloads) {
      for (const container of candidate.spec.template.spec.containers) {
        for (const variable of container.env ?? []) {
          const ref = variable.valueFrom?.secretKeyRef;
          if (!ref || ref.optional) continue;
          const secret = find(objects, 'Secret', ref.name) as { stringData?: Record<string, string> } | undefined;
          expect(secret?.stringData?.[ref.key], `${key(candidate)} ${variable.name}`).toBeTruthy();
        }
      }
    }
  });
});

describe('queue-depth autoscaling', () => {
  it('scales on encoder_queue_inputs, a gauge serve exports, named alike in the Prometheus adapter rule', async () => {
    const objects = renderKustomization(path.join(root, 'overlays', 'queue-autoscaling'));
    const hpa = find(objects, 'HorizontalPodAutoscaler', 'model-server') as KubernetesObject & { spec: { metrics: { type: string; pods?: { metric: { name: string } } }[] } };
    expect(hpa.spec.metrics.map((metric) => metric.type)).toEqual(['Resource', 'Pods']);
    const name = hpa.spec.metrics[1].pods!.metric.name;
    const source = { modelId: 'm', modelType: 'embedding', serverInfo: { name: 'encoder', version: '0', build: {} }, batchingStats: () => ({ queuedSequences: 7 }) } as unknown as MetricsSource;
    const metric = await new PrometheusMetrics(source).registry.getSingleMetric(name)?.get();
    expect(metric?.type).toBe('gauge');
    expect(metric?.values[0].value).toBe(7); // the scheduler's waiting inputs
    const values = parseAllDocuments(readFileSync(path.join(root, 'overlays', 'queue-autoscaling', 'prometheus-adapter-values.yaml'), 'utf8'))[0].toJSON() as {
      rules: { custom: { seriesQuery: string; name: { as: string } }[] };
    };
    expect(values.rules.custom[0].seriesQuery.startsWith(`${name}{`)).toBe(true);
    expect(values.rules.custom[0].name.as).toBe(name);
  });
});
