// The JSON patches the sidecar provisioner writes a workload with (the chart grants `patch`,
// never `update`): the template replaced whole, our annotations added or removed one by one
// (others untouched), and the resourceVersion read as precondition, so a concurrent edit
// answers 409 and the reconciler re-reads.
import type { V1Deployment, V1PodTemplateSpec, V1StatefulSet } from "@kubernetes/client-node";

type Workload = V1Deployment | V1StatefulSet;

export type JsonPatchOp =
  { op: "add" | "replace" | "test"; path: string; value: unknown } | { op: "remove"; path: string };

/** RFC 6901: `~` and `/` in a key. */
export function pointer(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** The JSON patch that writes `template` and `ours` onto `workload` as read. */
export function workloadPatch(
  workload: Workload,
  template: V1PodTemplateSpec,
  ours: Record<string, string | undefined>,
): JsonPatchOp[] {
  return [...annotationsPatch(workload, ours), { op: "replace", path: "/spec/template", value: template }];
}

/** The JSON patch that writes only `ours` (set, or removed when undefined) onto `workload` as read. */
export function annotationsPatch(
  workload: Workload,
  ours: Record<string, string | undefined>,
): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [
    { op: "replace", path: "/metadata/resourceVersion", value: workload.metadata!.resourceVersion },
  ];
  const annotations = workload.metadata!.annotations;
  const set = Object.entries(ours).filter((e): e is [string, string] => e[1] !== undefined);
  if (!annotations) {
    if (set.length > 0)
      ops.push({ op: "add", path: "/metadata/annotations", value: Object.fromEntries(set) });
  } else {
    for (const [key, value] of Object.entries(ours)) {
      const path = `/metadata/annotations/${pointer(key)}`;
      if (value !== undefined) ops.push({ op: "add", path, value });
      else if (key in annotations) ops.push({ op: "remove", path });
    }
  }
  return ops;
}
