// The operator-level allow-list (DESIGN §6): which namespaces, and optionally which
// target kinds, any session may touch. It is set at install time (the chart fills the
// options) and cannot be widened through the CRDs, so it is checked before a session
// creates anything.
import { OptionError } from "../../../lib/option-error.js";
import { TARGET_KINDS, parseTarget, type TargetKind } from "../../../proto/api/v1alpha1/index.js";

export interface SessionAllowListOptions {
  /** Namespaces sessions may use; `["*"]` (the default) allows every namespace. */
  namespaces?: readonly string[];
  /** Target kinds sessions may use (default: every kind: deployment, statefulset, pod). */
  targetKinds?: readonly TargetKind[];
}

export type AllowListVerdict = { allowed: true } | { allowed: false; reason: string; message: string };

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export class SessionAllowList {
  private readonly namespaces: ReadonlySet<string> | "*";
  private readonly kinds: ReadonlySet<TargetKind>;

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
  }

  check(namespace: string, target: string): AllowListVerdict {
    if (this.namespaces !== "*" && !this.namespaces.has(namespace)) {
      return {
        allowed: false,
        reason: "NamespaceNotAllowed",
        message:
          `namespace ${namespace} is not in the operator's session allow-list ` +
          `(${[...this.namespaces].sort().join(", ")}); ask an administrator to add it at install time`,
      };
    }
    const kind = parseTarget(target).kind;
    if (!this.kinds.has(kind)) {
      return {
        allowed: false,
        reason: "TargetKindNotAllowed",
        message:
          `target kind ${kind} is not allowed by the operator (allowed: ${[...this.kinds].sort().join(", ")}); ` +
          `choose another target or ask an administrator`,
      };
    }
    return { allowed: true };
  }
}
