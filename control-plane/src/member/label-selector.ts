// Matches labels against a Kubernetes LabelSelector (matchLabels and matchExpressions),
// the way the API server does, so target resolution finds the same pods a Deployment or
// StatefulSet owns. An empty selector matches nothing here: a workload always has one,
// and matching every pod in the namespace would be the wrong failure.
import type { V1LabelSelector } from "@kubernetes/client-node";

export function selectorMatches(
  selector: V1LabelSelector | undefined,
  labels: Record<string, string> = {},
): boolean {
  if (!selector) return false;
  const ml = selector.matchLabels ?? {};
  const exprs = selector.matchExpressions ?? [];
  if (Object.keys(ml).length === 0 && exprs.length === 0) return false;
  for (const [k, v] of Object.entries(ml)) if (labels[k] !== v) return false;
  for (const e of exprs) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case "In":
        if (!has || !values.includes(labels[e.key]!)) return false;
        break;
      case "NotIn":
        if (has && values.includes(labels[e.key]!)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}
