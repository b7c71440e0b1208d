#!/usr/bin/env bash
# Installs the Debian packages real test nodes need (test/env/nodes): containerd and runc, the CNI
# plugins, iptables, iproute2 and util-linux for ip, nsenter and unshare, and busybox-static (a
# statically linked program for the transparent network tests of `switchyard exec`). Idempotent: installs
# only what is missing. Starts no daemon: the nodes run their own containerd, and on a host with
# systemd the package's containerd.service is stopped and disabled again if installing started it.
# Usage (as root, or with sudo on PATH): test/env/nodes/install-host-packages.sh
set -euo pipefail
packages=(containerd runc containernetworking-plugins iptables iproute2 util-linux busybox-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "node packages already installed: ${packages[*]}"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
had_containerd_service=0
if [ -d /run/systemd/system ] && systemctl is-active --quiet containerd 2>/dev/null; then
  had_containerd_service=1
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The package enables and starts containerd.service under systemd; a host daemon would compete
# with nothing here but costs memory and leaves /run/containerd and /var/lib/containerd in use.
if [ -d /run/systemd/system ] && [ "$had_containerd_service" -eq 0 ]; then
  $sudo systemctl disable --now containerd >/dev/null 2>&1 || true
fi
echo "installed: ${missing[*]}"
