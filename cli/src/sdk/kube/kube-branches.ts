// Database branches as Kubernetes objects on the Primary (DESIGN §7), with the user's own
// credentials: PgBranchDatabase and MysqlBranchDatabase CRs created (or, for a shared
// branch, reused when its spec matches) before a session, read and listed for
// `switchyard branches`, and deleted. The branch's credentials are read from the Secret
// its status names; they stay in memory and are never logged.
import { ApiException, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import {
  BRANCH_ENGINES,
  BRANCH_KINDS,
  GROUP,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  readBranchSecretData,
  type BranchCredentials,
  type BranchDatabase,
  type BranchDatabaseSpec,
  type BranchKind,
  type StatusCondition,
} from "../../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { branchObjectName, type BranchRequest } from "../local/branch-config.js";
import { explainKubeError } from "./kube-access.js";

const FIELD_MANAGER = "switchyard-cli";
/** Label on a branch the CLI made for one session only: that session's name. */
export const BRANCH_SESSION_LABEL = `${GROUP}/session`;

/** A branch CR a session uses. */
export interface BranchHandle {
  kind: BranchKind;
  name: string;
  namespace: string;
  /** The target's variable pointed at this branch. */
  envVar: string;
  /** Made by this CLI for this session only (no id): deleted when the session ends. */
  owned: boolean;
}

/** A Ready branch and its credentials (from its Secret). Never log `credentials`. */
export interface ReadyBranch extends BranchHandle {
  branchName: string;
  credentials: BranchCredentials;
}

export interface BranchSummary {
  name: string;
  namespace: string;
  kind: BranchKind;
  phase: string;
  branch?: string;
  target: string;
  id?: string;
  expiresAt?: string;
  sessions: string[];
  secretName?: string;
  createdAt?: string;
  deleting: boolean;
}

export const plural = (kind: BranchKind): string => `${BRANCH_ENGINES[kind].plural}.${GROUP}`;

/** The conditions of a branch, for `branches status`. */
export const conditionsOf = (b: BranchDatabase): StatusCondition[] => b.status?.conditions ?? [];

/** Why a branch failed: its `Failed` condition, else its `Ready` one. */
export function failureOf(b: BranchDatabase): { reason: string; message: string } | undefined {
  const c = conditionsOf(b);
  const f = c.find((x) => x.type === "Failed" && x.status === "True") ?? c.find((x) => x.type === "Ready");
  return f ? { reason: f.reason, message: f.message } : undefined;
}

export function summarize(b: BranchDatabase, kind: BranchKind): BranchSummary {
  const s = b.status;
  const opt = <K extends string, V>(k: K, v: V | undefined) =>
    v === undefined || v === "" ? {} : ({ [k]: v } as Record<K, V>);
  return {
    name: b.metadata.name!,
    namespace: b.metadata.namespace!,
    kind,
    phase: s?.phase ?? "Pending",
    ...opt("branch", s?.branchName),
    target: b.spec.target,
    ...opt("id", b.spec.id),
    ...opt("expiresAt", s?.expiresAt),
    sessions: s?.sessions ?? [],
    ...opt("secretName", s?.secretName),
    ...opt("createdAt", b.metadata.creationTimestamp ? String(b.metadata.creationTimestamp) : undefined),
    deleting: b.metadata.deletionTimestamp !== undefined,
  };
}

/** Spec fields that must match to share a branch, with the API server's defaults filled in. */
function comparable(spec: BranchDatabaseSpec): Record<string, unknown> {
  return {
    target: spec.target,
    source: spec.source,
    "copy.mode": spec.copy?.mode ?? "schema",
    "copy.filters": spec.copy?.filters ?? [],
  };
}

/** Stable JSON: the API server may return an object's keys in another order. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );

export class KubeBranches {
  readonly #kc: KubeConfig;
  readonly #clients;
  readonly #core: CoreV1Api;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
    this.#clients = {
      PgBranchDatabase: pgBranchDatabaseClient(kc, { fieldManager: FIELD_MANAGER }),
      MysqlBranchDatabase: mysqlBranchDatabaseClient(kc, { fieldManager: FIELD_MANAGER }),
    };
    this.#core = kc.makeApiClient(CoreV1Api);
  }

  #fail(err: unknown, verb: string, kind: BranchKind, namespace?: string, name?: string): CliError {
    return explainKubeError(
      err,
      { verb, resource: plural(kind), ...(namespace ? { namespace } : {}), ...(name ? { name } : {}) },
      this.#kc,
    );
  }

  /**
   * Creates the branch `req` asks for session `sessionName`, or reuses the shared one of the
   * same id when its spec matches; a mismatch is BRANCH_CONFLICT naming the field.
   */
  async ensure(
    req: BranchRequest,
    sessionName: string,
    namespace: string,
  ): Promise<BranchHandle & { reused: boolean }> {
    const name = branchObjectName(req, sessionName);
    const handle = { kind: req.kind, name, namespace, envVar: req.envVar, owned: req.id === undefined };
    const labels = {
      [`${GROUP}/created-by`]: "switchyard-cli",
      ...(handle.owned ? { [BRANCH_SESSION_LABEL]: sessionName } : {}),
    };
    const client = this.#clients[req.kind];
    try {
      await client.create({ metadata: { name, namespace, labels }, spec: req.spec });
      return { ...handle, reused: false };
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 409 && req.id !== undefined))
        throw this.#fail(err, "create", req.kind, namespace);
    }
    const existing = await this.get(req.kind, name, namespace);
    if (!existing) return this.ensure(req, sessionName, namespace); // deleted meanwhile
    const want = comparable(req.spec);
    const have = comparable(existing.spec);
    const differs = Object.keys(want).filter((k) => canonical(want[k]) !== canonical(have[k]));
    if (differs.length > 0)
      throw new CliError(
        CliErrorCode.BRANCH_CONFLICT,
        `${req.field} (id ${req.id}) would share ${req.kind} ${name} in namespace ${namespace}, but its ` +
          `${differs.map((k) => `spec.${k} is ${canonical(have[k])}`).join(" and ")} where this config asks for ` +
          `${differs.map((k) => canonical(want[k])).join(" and ")}: use the same ${differs.join(", ")} as the ` +
          `sessions sharing it, pick another id, or delete it with \`switchyard branches destroy ${name}\``,
      );
    return { ...handle, reused: true };
  }

  async get(kind: BranchKind, name: string, namespace: string): Promise<BranchDatabase | undefined> {
    try {
      return await this.#clients[kind].get({ name, namespace });
    } catch (err) {
      throw this.#fail(err, "get", kind, namespace, name);
    }
  }

  /** Every branch named `name` in the namespace, of `kind` or of both kinds. */
  async find(
    name: string,
    namespace: string,
    kind?: BranchKind,
  ): Promise<Array<{ kind: BranchKind; branch: BranchDatabase }>> {
    const out: Array<{ kind: BranchKind; branch: BranchDatabase }> = [];
    for (const k of kind ? [kind] : BRANCH_KINDS) {
      const branch = await this.get(k, name, namespace);
      if (branch) out.push({ kind: k, branch });
    }
    return out;
  }

  /** Branches of both kinds in `namespace` (undefined: all namespaces), by namespace and name. */
  async list(namespace?: string): Promise<Array<{ kind: BranchKind; branch: BranchDatabase }>> {
    const out: Array<{ kind: BranchKind; branch: BranchDatabase }> = [];
    for (const kind of BRANCH_KINDS) {
      const where = namespace === undefined ? {} : { namespace };
      const list = await this.#clients[kind].list(where).catch((err: unknown) => {
        throw this.#fail(err, "list", kind, namespace);
      });
      for (const branch of list.items) out.push({ kind, branch });
    }
    return out.sort(
      (a, b) =>
        a.branch.metadata.namespace!.localeCompare(b.branch.metadata.namespace!) ||
        a.branch.metadata.name!.localeCompare(b.branch.metadata.name!) ||
        a.kind.localeCompare(b.kind),
    );
  }

  /** Asks for the branch's deletion; false when it was already gone. */
  async delete(h: Pick<BranchHandle, "kind" | "name" | "namespace">): Promise<boolean> {
    try {
      return await this.#clients[h.kind].delete({ name: h.name, namespace: h.namespace });
    } catch (err) {
      throw this.#fail(err, "delete", h.kind, h.namespace, h.name);
    }
  }

  /** The credentials in Secret `secretName`, or undefined while it is missing or incomplete. */
  async credentials(namespace: string, secretName: string): Promise<BranchCredentials | undefined> {
    try {
      const s = await this.#core.readNamespacedSecret({ name: secretName, namespace });
      return readBranchSecretData(s.data);
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw explainKubeError(
        err,
        { verb: "get", resource: "secrets", namespace, name: secretName },
        this.#kc,
      );
    }
  }
}
