// The `server` provisioners this control plane was given (branching-options.ts): one per
// engine whose branch server is configured. A kind with neither a server nor a pod provisioner
// (pod-provisioners.ts) has none, and its branches fail with NoProvisioner quoting
// BRANCH_PROVISIONER_HINT.
import type { Logger } from "pino";
import type { BranchKind } from "../../../proto/api/v1alpha1/index.js";
import type { BranchProvisioner } from "./branch-provisioner.js";
import type { BranchingOptions } from "./branching-options.js";
import { MysqlServerBranches } from "./mysql/mysql-server-branches.js";
import { PgServerBranches } from "./postgres/pg-server-branches.js";

export const BRANCH_PROVISIONER_HINT =
  "set branching.postgres.urlSecret or branching.mysql.urlSecret in the chart values of the Default " +
  "cluster's install (flags --branch-postgres-url-file, --branch-mysql-url-file), or a pod per branch: " +
  "branching.postgres.provisioner: pod with branching.postgres.pod.image, or branching.mysql.provisioner: pod " +
  "with branching.mysql.pod.image (flags --branch-provisioner-postgres pod --branch-pod-image-postgres <image>, " +
  "--branch-provisioner-mysql pod --branch-pod-image-mysql <image>)";

export function serverProvisioners(
  o: BranchingOptions,
  logger: Logger,
): Partial<Record<BranchKind, BranchProvisioner>> {
  const out: Partial<Record<BranchKind, BranchProvisioner>> = {};
  if (o.postgres) {
    out.PgBranchDatabase = new PgServerBranches({
      adminUrl: o.postgres.adminUrl,
      ...(o.postgres.advertise ? { advertise: o.postgres.advertise } : {}),
      serverAliases: o.serverAliases,
      ...(o.clientBinDir ? { pgBinDir: o.clientBinDir } : {}),
      logger,
    });
  }
  if (o.mysql) {
    out.MysqlBranchDatabase = new MysqlServerBranches({
      adminUrl: o.mysql.adminUrl,
      ...(o.mysql.advertise ? { advertise: o.mysql.advertise } : {}),
      serverAliases: o.serverAliases,
      ...(o.clientBinDir ? { clientBinDir: o.clientBinDir } : {}),
      logger,
    });
  }
  return out;
}
