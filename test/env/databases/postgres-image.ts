// A PostgreSQL image for real nodes, without Docker: Debian's PostgreSQL 15
// (install-database-packages.sh) — initdb, postgres, pg_ctl, pg_dump, psql and pg_isready with
// their libraries, the share directory, the server's loadable modules (less the LLVM JIT), the
// time zone database — plus bash, sh and a few coreutils, and an entrypoint that follows the
// official `postgres` image's contract (fixtures/postgres-entrypoint.sh: POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB, /docker-entrypoint-initdb.d/). Runs as uid 999, as the
// official image's `postgres` user.
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { V1EnvVarSource, V1PodSpec } from "@kubernetes/client-node";
import {
  baseDirectories,
  hostBinary,
  hostTree,
  OciImageError,
  type ImageFile,
  type ImageSpec,
} from "../images/oci-image.js";

export const POSTGRES_IMAGE = "switchyard.test/postgres:15";
export const POSTGRES_IMAGE_UID = 999;

const BIN = "/usr/lib/postgresql/15/bin";
const LIB = "/usr/lib/postgresql/15/lib";
const SHARE = "/usr/share/postgresql/15";
const ENTRYPOINT = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "postgres-entrypoint.sh");

export async function postgresImage(name = POSTGRES_IMAGE): Promise<ImageSpec> {
  if (!existsSync(join(BIN, "postgres")) || !existsSync(join(BIN, "psql")))
    throw new OciImageError(
      `${BIN} lacks postgres or psql: run test/env/databases/install-database-packages.sh`,
    );
  const files: ImageFile[] = [
    ...baseDirectories(),
    ...(await hostBinary("/usr/bin/bash", "/bin/bash")),
    // pg_ctl and initdb start the server through /bin/sh.
    ...(await hostBinary("/usr/bin/dash", "/bin/sh")),
  ];
  for (const tool of ["mkdir", "chmod", "rm", "cat", "sleep"])
    files.push(...(await hostBinary(`/usr/bin/${tool}`)));
  for (const tool of ["initdb", "postgres", "pg_ctl", "pg_dump", "psql", "pg_isready"])
    files.push(...(await hostBinary(join(BIN, tool))));
  // Loadable modules (plpgsql, snowball dictionaries, encoding conversions, contrib) without
  // the LLVM JIT, whose library alone is larger than the rest: without it JIT is off.
  for (const entry of readdirSync(LIB).filter((f) => f.endsWith(".so") && !f.startsWith("llvmjit")))
    files.push({ path: join(LIB, entry), source: join(LIB, entry) });
  for (const module of ["plpgsql.so", "dict_snowball.so"])
    files.push(...(await hostBinary(join(LIB, module))));
  files.push(...hostTree(SHARE, SHARE), ...hostTree("/usr/share/zoneinfo", "/usr/share/zoneinfo"));
  const uid = POSTGRES_IMAGE_UID;
  const layer: ImageFile[] = [
    {
      path: "/etc/passwd",
      content: `root:x:0:0:root:/root:/sbin/nologin\npostgres:x:${uid}:${uid}::/var/lib/postgresql:/bin/sh\nnobody:x:65534:65534::/:/sbin/nologin\n`,
    },
    { path: "/etc/group", content: `root:x:0:\npostgres:x:${uid}:\nnogroup:x:65534:\n` },
    // The socket directory libpq and the server default to; any uid may run the image.
    { path: "/var/run/postgresql", directory: true, mode: 0o1777 },
    { path: "/var/lib/postgresql", directory: true, mode: 0o1777 },
    { path: "/var/lib/postgresql/data", directory: true, mode: 0o1777 },
    { path: "/docker-entrypoint-initdb.d", directory: true },
    { path: "/usr/local/bin/docker-entrypoint.sh", source: ENTRYPOINT, mode: 0o755 },
  ];
  return {
    name,
    files,
    layers: [layer],
    entrypoint: ["/usr/local/bin/docker-entrypoint.sh"],
    cmd: ["postgres"],
    env: [
      `PATH=${BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
      "PGDATA=/var/lib/postgresql/data",
    ],
    user: `${uid}:${uid}`,
    exposedPorts: ["5432/tcp"],
  };
}

export interface PostgresPodOptions {
  user: string;
  database: string;
  /** The password, or where the kubelet reads it from (a Secret key). */
  password: string | V1EnvVarSource;
  /** A ConfigMap whose files the entrypoint runs once (`/docker-entrypoint-initdb.d`). */
  initConfigMap: string;
}

/** A pod spec running this image as its `postgres` user, data on an emptyDir, ready once it listens. */
export function postgresPodSpec(o: PostgresPodOptions): V1PodSpec {
  return {
    securityContext: { runAsNonRoot: true, runAsUser: POSTGRES_IMAGE_UID, fsGroup: POSTGRES_IMAGE_UID },
    containers: [
      {
        name: "postgres",
        image: POSTGRES_IMAGE,
        imagePullPolicy: "Never",
        env: [
          { name: "POSTGRES_USER", value: o.user },
          { name: "POSTGRES_DB", value: o.database },
          typeof o.password === "string"
            ? { name: "POSTGRES_PASSWORD", value: o.password }
            : { name: "POSTGRES_PASSWORD", valueFrom: o.password },
          { name: "PGDATA", value: "/var/lib/postgresql/data/pgdata" },
        ],
        ports: [{ containerPort: 5432 }],
        // The entrypoint's initialising server listens on its socket only.
        readinessProbe: { tcpSocket: { port: 5432 }, periodSeconds: 1 },
        volumeMounts: [
          { name: "data", mountPath: "/var/lib/postgresql/data" },
          { name: "init", mountPath: "/docker-entrypoint-initdb.d" },
        ],
      },
    ],
    volumes: [
      { name: "data", emptyDir: {} },
      { name: "init", configMap: { name: o.initConfigMap } },
    ],
  };
}
