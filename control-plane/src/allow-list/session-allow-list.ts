// The operator-level allow-list (DESIGN §6): which namespaces, target kinds and targets any
// session may touch. It is set at install time (chart values → control-plane flags) and
// cannot be widened through the CRDs. Every cluster checks it for itself — the Primary
// before a parent creates anything, each member before a ClusterSession (a child, or one
// created directly on that cluster) provisions anything — so a member never trusts that a
// Primary, or whoever created the object, checked it.
import { OptionError } from "../../../lib/option-error.js";
import { TARGET_KINDS, parseTarget, type TargetKind } from "../../../proto/api/v1alpha1/index.js";
import { parseTargetPattern, type TargetPattern } from "./target-pattern.js";

export interface SessionAllowListOptions {
  /** Namespaces sessions may use; `["*"]` (the default) allows every namespace. */
  namespaces?: readonly string[];
  /** Target kinds sessions may use (default: every kind: deployment, statefulset, pod). */
  targetKinds?: readonly TargetKind[];
  /**
   * Targets sessions may use, as `<namespace>/<kind>/<name>` patterns (`*` = any run of
   * characters within a part); a session's target must match one. Default: every target.
   */
  targets?: readonly string[];
}

/** Which part of a session the verdict is about, as a field path of the session object. */
export type AllowListField = "metadata.namespace" | "spec.target";

/** Why a session is refused: the Valid=False reasons this allow-list writes (a closed set, for metrics). */
export const ALLOW_LIST_REFUSALS = [
  "NamespaceNotAllowed",
  "InvalidTarget",
  "TargetKindNotAllowed",
  "TargetNotAllowed",
] as const;
export type AllowListRefusal = (typeof ALLOW_LIST_REFUSALS)[number];

export type AllowListVerdict =
  { allowed: true } | { allowed: false; reason: AllowListRefusal; message: string; field: AllowListField };

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Patterns named in a refusal; a longer list is cut (the administrator knows the rest). */
const LISTED_MAX = 10;

const listed = (items: readonly string[]): string =>
  items.length <= LISTED_MAX
    ? items.join(", ")
    : `${items.slice(0, LISTED_MAX).join(", ")} and ${items.length - LISTED_MAX} more`;

export class SessionAllowList {
  private readonly namespaces: ReadonlySet<string> | "*";
  private readonly kinds: ReadonlySet<TargetKind>;
  private readonly targets: readonly TargetPattern[] | "*";

  constructor(options: SessionAllowListOptions = {}) {
    const ns = options.namespaces ?? ["*"];
    if (ns.length === 0)
      throw new OptionError(
        "allowList.namespaces",
        'is empty, which would refuse every session; list namespaces or use ["*"]',
      );
    if (ns.includes("*")) {
      if (ns.length > 1)
        throw new OptionError("allowList.namespaces", '"*" allows every namespace; list nothing else');
      this.namespaces = "*";
    } else {
      for (const n of ns)
        if (!NAMESPACE.test(n))
          throw new OptionError("allowList.namespaces", `"${n}" is not a namespace name (RFC 1123 label)`);
      this.namespaces = new Set(ns);
    }
    const kinds = options.targetKinds ?? TARGET_KINDS;
    if (kinds.length === 0)
      throw new OptionError("allowList.targetKinds", "is empty; omit it to allow every kind");
    for (const k of kinds)
      if (!(TARGET_KINDS as readonly string[]).includes(k))
        throw new OptionError("allowList.targetKinds", `"${k}" is not one of ${TARGET_KINDS.join(", ")}`);
    this.kinds = new Set(kinds);
    if (options.targets === undefined) this.targets = "*";
    else if (options.targets.length === 0)
      throw new OptionError(
        "allowList.targets",
        "is empty, which would refuse every session; omit it to allow every target",
      );
    else this.targets = options.targets.map((t) => parseTargetPattern(t, "allowList.targets"));
  }

  /** Whether a session in `namespace` on `target` (the spec's string) may run. */
  check(namespace: string, target: string): AllowListVerdict {
    if (this.namespaces !== "*" && !this.namespaces.has(namespace)) {
      return {
        allowed: false,
        field: "metadata.namespace",
        reason: "NamespaceNotAllowed",
        message:
          `metadata.namespace: namespace ${namespace} is not in the operator's session allow-list ` +
          `(${listed([...this.namespaces].sort())}); create the session in an allowed namespace, or ask an ` +
          `administrator to add it (chart value sessions.allowedNamespaces, flag --allowed-namespaces)`,
      };
    }
    let parsed: ReturnType<typeof parseTarget>;
    try {
      parsed = parseTarget(target);
    } catch (err) {
      return {
        allowed: false,
        field: "spec.target",
        reason: "InvalidTarget",
        message: `spec.target: ${(err as Error).message}`,
      };
    }
    if (!this.kinds.has(parsed.kind)) {
      return {
        allowed: false,
        field: "spec.target",
        reason: "TargetKindNotAllowed",
        message:
          `spec.target: target kind ${parsed.kind} is not allowed by the operator's session allow-list ` +
          `(allowed: ${[...this.kinds].sort().join(", ")}); choose a target of an allowed kind, or ask an ` +
          `administrator to allow it (chart value sessions.allowedTargetKinds, flag --allowed-target-kinds)`,
      };
    }
    if (this.targets !== "*" && !this.targets.some((p) => p.matches(namespace, parsed.kind, parsed.name))) {
      return {
        allowed: false,
        field: "spec.target",
        reason: "TargetNotAllowed",
        message:
          `spec.target: target ${namespace}/${parsed.kind}/${parsed.name} matches none of the operator's ` +
          `allowed targets (${listed(this.targets.map((p) => p.source))}); choose an allowed target, or ask ` +
          `an administrator to add a pattern (chart value sessions.allowedTargets, flag --allowed-targets)`,
      };
    }
    return { allowed: true };
  }
}
