#!/usr/bin/env bash
# The daemon's memory for forgotten files whose handles it keeps (--handles): makes N
# empty files (1,000 per directory) on a tmpfs backing, mounts with each --handles value,
# stats every file through the mount (a lookup each), makes the kernel forget them all
# (drop_caches: root, not in a container), prints the daemon's RSS and what it kept, and
# walks once more (looked-up names get their kept node back: RSS must not grow).
# usage: bench/handles-memory.sh [N] [HANDLES...]   (default 1500000, 0 262144 1048576 2000000)
set -euo pipefail
n=${1:-1500000}
shift || true
limits=("${@:-0 262144 1048576 2000000}")
read -r -a limits <<<"${limits[*]}"
appbox=${APPBOX:-$(cd "$(dirname "$0")/.." && pwd)/.build/release/appbox}
work=$(mktemp -d)
export XDG_RUNTIME_DIR=$work/run
mkdir -p "$work/back" "$work/mnt" "$XDG_RUNTIME_DIR"
mount -t tmpfs -o size=4g,nr_inodes=$((n * 2 + 10000)) tmpfs "$work/back"
trap 'umount "$work/back"; rm -rf "$work"' EXIT
python3 - "$work/back" "$n" <<'PY'
import os, sys
back, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(back, "Documents", "m", "d%04d" % (i // 1000))
    if i % 1000 == 0: os.makedirs(d, exist_ok=True)
    os.close(os.open(os.path.join(d, "f%03d" % (i % 1000)), os.O_CREAT | os.O_WRONLY, 0o644))
PY
for limit in "${limits[@]}"; do
  "$appbox" mount --backing "$work/back" --handles "$limit" "$work/mnt"
  pid=$(cat "$XDG_RUNTIME_DIR"/appbox/*.pid)
  rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
  kept() { "$appbox" status "$work/mnt" --json | tr ',' '\n' | grep -E '"(nodes|retainedHandles)"' | tr '\n' ' '; }
  echo "--handles $limit: empty $(rss) KiB"
  for walk in first second; do
    start=$SECONDS
    find "$work/mnt/Documents/m" -type f -printf '%s\n' | wc -l >/dev/null
    sync; echo 2 >/proc/sys/vm/drop_caches; sleep 2; echo 2 >/proc/sys/vm/drop_caches; sleep 1
    echo "--handles $limit: after the $walk walk ($((SECONDS - start)) s) $(rss) KiB, $(kept)"
  done
  "$appbox" unmount "$work/mnt"
  rm -f "$XDG_RUNTIME_DIR"/appbox/*
done
