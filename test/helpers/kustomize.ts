/**
 * Renders a kustomization the way `kustomize build` does, for the subset of kustomize that deploy/kubernetes uses:
 * `resources` (files of YAML documents, or folders with their own kustomization.yaml), `namespace`, `images`,
 * `replicas` and `patches` holding RFC 6902 operations with a `target` by kind and name. Anything else in a
 * kustomization file is refused rather than ignored, so a manifest cannot quietly rely on a feature this does not
 * do. Debian packages no kustomize; where `kubectl` is on the PATH its built-in kustomize renders the same overlays
 * and the test compares both (test/deploy/kubernetes-manifests.test.ts).
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  namespace?: string;
  images?: { name: string; newName?: string; newTag?: string }[];
  replicas?: { name: string; count: number }[];
  patches?: { target: { kind: string; name: string }; patch: string }[];
}

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'replicas', 'patches']);
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass']);
const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'ReplicaSet']);

export function renderKustomization(dir: string): KubernetesObject[] {
  const kustomization = parse(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8')) as Kustomization;
  const unsupported = Object.keys(kustomization).filter((key) => !SUPPORTED.has(key));
  if (unsupported.length > 0) throw new Error(`${dir}/kustomization.yaml: ${unsupported.join(', ')} not supported by this renderer`);

  const objects: KubernetesObject[] = [];
  for (const resource of kustomization.resources ?? []) {
    const full = path.resolve(dir, resource);
    if (statSync(full).isDirectory()) objects.push(...renderKustomization(full));
    else objects.push(...parseAllDocuments(readFileSync(full, 'utf8')).map((document) => document.toJSON() as KubernetesObject));
  }
  for (const { target, patch } of kustomization.patches ?? []) {
    const matching = objects.filter((object) => object.kind === target.kind && object.metadata.name === target.name);
    if (matching.length === 0) throw new Error(`${dir}: no ${target.kind} ${target.name} to patch`);
    for (const object of matching) for (const operation of parse(patch) as JsonPatchOperation[]) applyOperation(object, operation);
  }
  for (const { name, count } of kustomization.replicas ?? []) {
    const matching = objects.filter((object) => WORKLOADS.has(object.kind) && object.metadata.name === name);
    if (matching.length === 0) throw new Error(`${dir}: no workload ${name} for replicas`);
    for (const object of matching) (object.spec as { replicas: number }).replicas = count;
  }
  for (const image of kustomization.images ?? []) for (const object of objects) retagImages(object, image);
  if (kustomization.namespace) {
    for (const object of objects) {
      if (object.kind === 'Namespace') object.metadata.name = kustomization.namespace;
      else if (!CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = kustomization.namespace;
    }
  }
  return objects;
}

interface JsonPatchOperation {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** RFC 6902 add, replace and remove (kustomize's patches also allow move, copy and test: unused here, refused). */
function applyOperation(document: object, { op, path: pointer, value }: JsonPatchOperation): void {
  const keys = pointer.split('/').slice(1).map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'));
  const last = keys.pop()!;
  let parent: unknown = document;
  for (const key of keys) {
    parent = (parent as Record<string, unknown>)?.[key];
    if (parent === undefined) throw new Error(`${op} ${pointer}: no ${key}`);
  }
  if (Array.isArray(parent)) {
    const index = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length || (op !== 'add' && index === parent.length)) throw new Error(`${op} ${pointer}: no index ${last}`);
    if (op === 'add') parent.splice(index, 0, value);
    else if (op === 'replace') parent[index] = value;
    else if (op === 'remove') parent.splice(index, 1);
    else throw new Error(`${op}: not supported`);
    return;
  }
  const object = parent as Record<string, unknown>;
  if (op !== 'add' && !(last in object)) throw new Error(`${op} ${pointer}: no ${last}`);
  if (op === 'add' || op === 'replace') object[last] = value;
  else if (op === 'remove') delete object[last];
  else throw new Error(`${op}: not supported`);
}

/** kustomize's images transformer on a workload's containers: `name[:tag]` whose name matches gets the new name and tag. */
function retagImages(object: KubernetesObject, image: NonNullable<Kustomization['images']>[number]): void {
  const pod = (object.spec as { template?: { spec?: Record<string, unknown> } } | undefined)?.template?.spec;
  if (!pod) return;
  for (const list of ['containers', 'initContainers']) {
    for (const container of (pod[list] as { image?: string }[] | undefined) ?? []) {
      const match = /^([^@:]+(?::\d+\/[^@:]+)?)(?::([^@]+))?$/.exec(container.image ?? '');
      if (!match || match[1] !== image.name) continue;
      container.image = `${image.newName ?? match[1]}${image.newTag ?? match[2] ? `:${image.newTag ?? match[2]}` : ''}`;
    }
  }
}
