#!/usr/bin/env bash
# Installs AppBox's build and test dependencies from Debian (idempotent; needs root).
set -euo pipefail
# nfs-ganesha(-vfs) and libnfs-utils: a user-space NFS server and client, to export a sandbox
# in a test (the kernel here has no NFS); chromium renders the HTML reports in a test;
# liburing-dev: FUSE over io_uring (CFuseDevice).
packages=(libfuse3-dev liburing-dev libsqlite3-dev fuse3 pkg-config attr acl sqlite3 git rsync tar python3 fio bindfs
  nfs-ganesha nfs-ganesha-vfs libnfs-utils chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null || { echo "install-deps: no Swift toolchain on PATH (expected /opt/swift/usr/bin)" >&2; exit 1; }
