// `switchyard branches list|status NAME|destroy NAME`: the database branches (both kinds,
// PgBranchDatabase and MysqlBranchDatabase) the user may see on the Primary, one branch's
// conditions, and deleting one — reported as deleted only once the object is gone (the
// sync controller's finalizer holds it until the Default cluster's copy is removed).
import type { KubeConfig } from "@kubernetes/client-node";
import type { BranchDatabase, BranchKind } from "../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import { waitBranchGone } from "../sdk/kube/branch-wait.js";
import { conditionsOf, KubeBranches, summarize, type BranchSummary } from "../sdk/kube/kube-branches.js";
import { BRANCH_ENGINE_KINDS, type BranchEngineName } from "../sdk/local/branch-config.js";
import { age, json, table, type Out, type OutputFormat } from "./output.js";

/** "in 4m", "expired", "-": when a branch goes unless a session extends it. */
export function expiresIn(at: string | undefined, now = Date.now()): string {
  if (!at) return "-";
  const ms = Date.parse(at) - now;
  if (!Number.isFinite(ms)) return "-";
  if (ms <= 0) return "expired";
  return `in ${age(new Date(now - ms).toISOString(), now)}`;
}

export function formatBranches(list: BranchSummary[], allNamespaces: boolean, now = Date.now()): string {
  if (list.length === 0) return "No database branches.\n";
  return table(
    [
      ...(allNamespaces ? ["NAMESPACE"] : []),
      "NAME",
      "KIND",
      "PHASE",
      "BRANCH",
      "TARGET",
      "EXPIRES",
      "SESSIONS",
    ],
    list.map((b) => [
      ...(allNamespaces ? [b.namespace] : []),
      b.name,
      b.kind,
      b.deleting ? `${b.phase} (deleting)` : b.phase,
      b.branch ?? "-",
      b.target,
      expiresIn(b.expiresAt, now),
      b.sessions.length ? b.sessions.join(",") : "-",
    ]),
  );
}

export async function branchesListCommand(
  kc: KubeConfig,
  o: { namespace: string | undefined },
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const list = (await new KubeBranches(kc).list(o.namespace)).map((b) => summarize(b.branch, b.kind));
  out.stdout(format === "json" ? json({ branches: list }) : formatBranches(list, o.namespace === undefined));
  return 0;
}

export interface BranchRefOptions {
  name: string;
  namespace: string;
  /** `postgres` or `mysql`, when a name exists as both kinds. */
  engine?: string;
}

function kindOf(engine: string | undefined): BranchKind | undefined {
  if (engine === undefined) return undefined;
  const kind = BRANCH_ENGINE_KINDS[engine as BranchEngineName];
  if (!kind)
    throw new CliError(CliErrorCode.INVALID_OPTION, `--engine ${engine}: must be "postgres" or "mysql"`);
  return kind;
}

/** The one branch `o` names; refuses a name that is missing or ambiguous. */
async function findOne(
  kube: KubeBranches,
  o: BranchRefOptions,
): Promise<{ kind: BranchKind; branch: BranchDatabase }> {
  const found = await kube.find(o.name, o.namespace, kindOf(o.engine));
  if (found.length === 0)
    throw new CliError(
      CliErrorCode.BRANCH_NOT_FOUND,
      `database branch ${o.name} not found in namespace ${o.namespace}${o.engine ? ` (engine ${o.engine})` : ""}; ` +
        "see `switchyard branches list` (-n for another namespace)",
    );
  if (found.length > 1)
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `database branch ${o.name} exists as both ${found.map((f) => f.kind).join(" and ")} in namespace ` +
        `${o.namespace}: pass --engine postgres or --engine mysql`,
    );
  return found[0]!;
}

function describeSource(b: BranchDatabase): string {
  const s = b.spec.source;
  if (s.fromEnv) return `the target's ${s.fromEnv.name}`;
  return `${s.host}${s.port ? `:${s.port}` : ""}/${s.database} as ${s.user}${s.passwordSecretRef ? ` (password from Secret ${s.passwordSecretRef.name})` : ""}`;
}

export function formatBranchStatus(kind: BranchKind, b: BranchDatabase, now = Date.now()): string {
  const s = summarize(b, kind);
  const copy = b.spec.copy;
  const filters = copy?.filters?.length ?? 0;
  const fields: Array<[string, string]> = [
    ["Name", s.name],
    ["Namespace", s.namespace],
    ["Kind", kind],
    ["Phase", s.deleting ? `${s.phase} (deleting)` : s.phase],
    ["Branch", s.branch ?? "-"],
    ["Target", s.target],
    ["Source", describeSource(b)],
    [
      "Copy",
      `${copy?.mode ?? "schema"}${filters ? ` + ${filters} row filter${filters > 1 ? "s" : ""}` : ""}`,
    ],
    ["Shared id", s.id ?? "-"],
    ["TTL", b.spec.ttlSeconds !== undefined ? `${b.spec.ttlSeconds}s` : "-"],
    ["Expires", s.expiresAt ? `${s.expiresAt} (${expiresIn(s.expiresAt, now)})` : "-"],
    ["Sessions", s.sessions.length ? s.sessions.join(", ") : "-"],
    ["Secret", s.secretName ?? "-"],
  ];
  const width = Math.max(...fields.map(([k]) => k.length)) + 2;
  const head = fields.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}\n`).join("");
  const conditions = conditionsOf(b);
  const body = conditions.length
    ? table(
        ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
        conditions.map((c) => [c.type, c.status, c.reason, age(c.lastTransitionTime, now), c.message]),
      )
    : "No conditions yet (the branching controller has not reported).\n";
  return `${head}\nConditions:\n${body}`;
}

export async function branchesStatusCommand(
  kc: KubeConfig,
  o: BranchRefOptions,
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const { kind, branch } = await findOne(new KubeBranches(kc), o);
  out.stdout(
    format === "json"
      ? json({ branch: summarize(branch, kind), spec: branch.spec, conditions: conditionsOf(branch) })
      : formatBranchStatus(kind, branch),
  );
  return 0;
}

export async function branchesDestroyCommand(
  kc: KubeConfig,
  o: BranchRefOptions & { waitSeconds: number },
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const kube = new KubeBranches(kc);
  const { kind } = await findOne(kube, o);
  const ref = { kind, name: o.name, namespace: o.namespace };
  const existed = await kube.delete(ref);
  const gone = !existed || (o.waitSeconds > 0 && (await waitBranchGone(kc, kube, ref, o.waitSeconds * 1000)));
  const finalizers = gone ? [] : ((await kube.get(kind, o.name, o.namespace))?.metadata.finalizers ?? []);
  if (format === "json")
    out.stdout(json({ destroyed: [{ name: o.name, namespace: o.namespace, kind, gone }] }));
  else if (gone) out.stdout(`database branch ${o.name} (${kind}) deleted\n`);
  else if (o.waitSeconds === 0)
    out.stdout(
      `deletion of database branch ${o.name} (${kind}) requested; it goes once its finalizers are done\n`,
    );
  else
    out.stdout(
      `deletion of database branch ${o.name} (${kind}) requested, but it still exists after ${o.waitSeconds} s` +
        `${finalizers.length ? ` (finalizers: ${finalizers.join(", ")}: its copy in the Default cluster is removed first)` : ""}; ` +
        `check with \`switchyard branches status ${o.name}\`\n`,
    );
  return gone || o.waitSeconds === 0 ? 0 : 1;
}
