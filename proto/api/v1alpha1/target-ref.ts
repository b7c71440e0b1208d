// Parses the target string of a session (`deployment/myapp/container/app`) into its
// parts. The CRD schema already guarantees the shape; this only splits it, so member
// reconcilers never re-implement the grammar.
import { TARGET_PATTERN, type TargetKind } from "./schema-primitives.js";

export interface ParsedTarget {
  kind: TargetKind;
  name: string;
  container?: string;
}

const targetRegExp = new RegExp(TARGET_PATTERN);

export class InvalidTargetError extends Error {
  readonly code = "SWITCHYARD_INVALID_TARGET";
  constructor(target: string) {
    // Quoted on one line and cut: the target may come from a flag or a file of any size.
    const shown = JSON.stringify(target.length > 80 ? `${target.slice(0, 80)}…` : target);
    super(
      `invalid target ${shown}: expected deployment/<name>, statefulset/<name> or pod/<name>, ` +
        `optionally followed by /container/<container>`,
    );
    this.name = "InvalidTargetError";
  }
}

export function parseTarget(target: string): ParsedTarget {
  if (target.length > 340 || !targetRegExp.test(target)) throw new InvalidTargetError(target);
  const [kind, name, , container] = target.split("/") as [TargetKind, string, string?, string?];
  return container === undefined ? { kind, name } : { kind, name, container };
}

export function formatTarget(target: ParsedTarget): string {
  const s = `${target.kind}/${target.name}${target.container ? `/container/${target.container}` : ""}`;
  parseTarget(s);
  return s;
}
