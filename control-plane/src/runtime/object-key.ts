// Names the object a reconcile is about. The queue works on the string form
// ("namespace/name", or "name" for cluster-scoped objects) so equal keys de-duplicate.
import type { KubernetesObject } from "@kubernetes/client-node";

export interface ObjectKey {
  namespace?: string;
  name: string;
}

export function keyString(key: ObjectKey): string {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

export function parseKeyString(s: string): ObjectKey {
  const slash = s.indexOf("/");
  return slash < 0 ? { name: s } : { namespace: s.slice(0, slash), name: s.slice(slash + 1) };
}

/** The key of an object itself, or undefined when it has no name (never the case for stored objects). */
export function keyOf(obj: KubernetesObject): ObjectKey | undefined {
  const name = obj.metadata?.name;
  if (!name) return undefined;
  return obj.metadata?.namespace ? { namespace: obj.metadata.namespace, name } : { name };
}
