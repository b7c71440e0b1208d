// How a step of making or dropping a branch fails, whichever part takes it (the source, the
// Postgres or MySQL/MariaDB `server` provisioner, the `pod` provisioner): a runtime
// ReconcileError whose kind says what retrying can do — `terminal` when the CR (or the
// provisioner's configuration) must change first, `transient` when the same request may pass
// later — with the CamelCase `reason` the branching controller records in the CR's Ready
// condition. Each part's subclass carries its stable `code`. No message holds a password.
import { ReconcileError } from "../runtime/index.js";

export type BranchErrorKind = "terminal" | "transient";

export abstract class BranchError extends ReconcileError {
  readonly kind: BranchErrorKind;

  constructor(
    /** The CR condition's reason, e.g. `SourceAccessDenied`. */
    readonly reason: string,
    message: string,
    kind: BranchErrorKind,
  ) {
    super(message);
    this.name = new.target.name;
    this.kind = kind;
  }

  /** Whether retrying cannot help: the kind, as a boolean. */
  get terminal(): boolean {
    return this.kind === "terminal";
  }
}
