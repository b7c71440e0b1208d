// A MariaDB image for real nodes, without Docker: Debian's MariaDB (install-database-packages.sh)
// — mariadbd, mariadb and mariadb-dump with their libraries, the share directory (system-table
// SQL, error messages, character sets) — plus bash, sed and a few coreutils, a server
// configuration like the official image's (socket /run/mysqld/mysqld.sock for server and
// clients, data in /var/lib/mysql, every address), and an entrypoint that follows the official
// `mariadb` image's contract (fixtures/mariadb-entrypoint.sh: MARIADB_USER, MARIADB_PASSWORD,
// MARIADB_DATABASE, MARIADB_ROOT_PASSWORD / MARIADB_RANDOM_ROOT_PASSWORD, MARIADB_ROOT_HOST,
// /docker-entrypoint-initdb.d/). Runs as uid 999, as the official image's `mysql` user.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  baseDirectories,
  hostBinary,
  hostTree,
  OciImageError,
  type ImageFile,
  type ImageSpec,
} from "../images/oci-image.js";

export const MARIADB_IMAGE = "switchyard.test/mariadb:1";
export const MARIADB_IMAGE_UID = 999;

const SHARE = "/usr/share/mysql";
const ENTRYPOINT = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "mariadb-entrypoint.sh");

// Small and fast, as test/env/databases/mariadb-server.ts: a test server holds a few MB.
const MY_CNF = `[client-server]
socket=/run/mysqld/mysqld.sock
port=3306

[mariadbd]
datadir=/var/lib/mysql
pid-file=/run/mysqld/mysqld.pid
tmpdir=/tmp
lc-messages-dir=${SHARE}
bind-address=0.0.0.0
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
innodb-buffer-pool-size=16M
innodb-log-file-size=8M
innodb-flush-log-at-trx-commit=0
innodb-doublewrite=0
performance-schema=OFF
`;

export async function mariadbImage(name = MARIADB_IMAGE): Promise<ImageSpec> {
  if (!existsSync("/usr/sbin/mariadbd") || !existsSync("/usr/bin/mariadb-dump"))
    throw new OciImageError(
      "mariadbd or mariadb-dump is missing: run test/env/databases/install-database-packages.sh",
    );
  const files: ImageFile[] = [
    ...baseDirectories(),
    ...(await hostBinary("/usr/bin/bash", "/bin/bash")),
    ...(await hostBinary("/usr/sbin/mariadbd")),
    ...(await hostBinary("/usr/bin/mariadb")),
    ...(await hostBinary("/usr/bin/mariadb-dump")),
  ];
  for (const tool of ["sed", "cat", "rm", "mkdir", "sleep", "od", "tr"])
    files.push(...(await hostBinary(`/usr/bin/${tool}`)));
  files.push(...hostTree(SHARE, SHARE));
  const uid = MARIADB_IMAGE_UID;
  const layer: ImageFile[] = [
    {
      path: "/etc/passwd",
      content: `root:x:0:0:root:/root:/sbin/nologin\nmysql:x:${uid}:${uid}::/var/lib/mysql:/bin/bash\nnobody:x:65534:65534::/:/sbin/nologin\n`,
    },
    { path: "/etc/group", content: `root:x:0:\nmysql:x:${uid}:\nnogroup:x:65534:\n` },
    { path: "/etc/mysql/my.cnf", content: MY_CNF },
    // Socket and pid file; any uid may run the image.
    { path: "/run/mysqld", directory: true, mode: 0o1777 },
    { path: "/var/lib/mysql", directory: true, mode: 0o1777 },
    { path: "/docker-entrypoint-initdb.d", directory: true },
    { path: "/usr/local/bin/docker-entrypoint.sh", source: ENTRYPOINT, mode: 0o755 },
  ];
  return {
    name,
    files,
    layers: [layer],
    entrypoint: ["/usr/local/bin/docker-entrypoint.sh"],
    cmd: ["mariadbd"],
    env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    user: `${uid}:${uid}`,
    exposedPorts: ["3306/tcp"],
  };
}
