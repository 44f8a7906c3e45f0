#!/usr/bin/env bash
# Scale benchmark for the purge index (docs/reference.md#quota-and-purging): a sandbox with
# FILES cache files (default 1,000,000, 1 byte each = one 4 KiB block) in 1,000 directories.
# Prints: mount time (the mount-time index), the daemon's memory per tracked file (RSS
# against an empty sandbox's), the time of an explicit purge of 100,000 files, and
# create+write/s of 4 KiB files into Documents while the sandbox is full (every write
# purges). Not a test: figures only. Needs root (drop_caches) and a release build.
#
#   bench/scale.sh [--files N] [--dir DIR] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
files=1000000
dir=/var/tmp/appbox-scale
binary=.build/release/appbox
while [ $# -gt 0 ]; do
  case "$1" in
    --files) files=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    *) echo "usage: bench/scale.sh [--files N] [--dir DIR] [--binary PATH]" >&2; exit 64 ;;
  esac
done
[ -x "$binary" ] || swift build -c release >/dev/null
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do fusermount3 -uz "$m" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

daemon_pid() {  # the daemon serving mountpoint $1
  for p in $(pgrep -f -- "--ready-fd"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- " $1 " && { echo "$p"; return; }
  done
}
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }

mkdir -p "$dir"
backing=$dir/backing; empty=$dir/empty; mnt=$dir/mnt; mnt0=$dir/mnt0
mkdir -p "$mnt" "$mnt0" "$empty"
if [ ! -f "$backing/.complete-$files" ]; then
  rm -rf "$backing"; mkdir -p "$backing/Library/Caches"
  echo "creating $files cache files in $backing (once)..."
  python3 - "$backing/Library/Caches" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = max(1, n // 1000)
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // per))
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    fd = os.open(os.path.join(d, "cache-file-%08d.bin" % i), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    os.close(fd)
PY
  touch "$backing/.complete-$files"
fi
used=$(du --block-size=1 -s "$backing" | cut -f1)

# Baseline: an empty sandbox's daemon.
"$binary" mount --backing "$empty" "$mnt0"; mounts+=("$mnt0")
base_rss=$(rss_kib "$(daemon_pid "$mnt0")")

sync; echo 3 > /proc/sys/vm/drop_caches
t0=$(now)
"$binary" mount --backing "$backing" --capacity $((used + 64 * 4096)) --unlocked "$mnt"; mounts+=("$mnt")
t1=$(now)
pid=$(daemon_pid "$mnt")
rss=$(rss_kib "$pid")
status=$("$binary" status --json "$mnt")
tracked=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["purgeableFiles"])' "$status")

t2=$(now)
"$binary" purge "$mnt" --bytes $((100000 * 4096)) >/dev/null
t3=$(now)

# Full sandbox: every new 4 KiB file in Documents must purge a cache file first.
"$binary" purge "$mnt" --bytes 0 >/dev/null
writes=2000
t4=$(now)
python3 - "$mnt/Documents" "$writes" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
block = b"y" * 4096
for i in range(n):
    fd = os.open(os.path.join(d, "w%06d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, block)
    os.close(fd)
PY
t5=$(now)
purges=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["purges"])' "$("$binary" status --json "$mnt")")

python3 - "$files" "$tracked" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$rss" "$base_rss" "$writes" "$purges" <<'PY'
import sys
files, tracked = int(sys.argv[1]), int(sys.argv[2])
t0, t1, t2, t3, t4, t5 = map(float, sys.argv[3:9])
rss, base, writes, purges = int(sys.argv[9]), int(sys.argv[10]), int(sys.argv[11]), int(sys.argv[12])
per_file = (rss - base) * 1024 / max(tracked, 1)
print("| measure | value | target |")
print("|---|---|---|")
print(f"| cache files tracked | {tracked:,} | {files:,} |")
print(f"| mount with index (cold cache) | {t1 - t0:.2f} s | < 10 s |")
print(f"| daemon memory per tracked file | {per_file:.0f} B (RSS {rss/1024:.0f} MiB vs empty {base/1024:.0f} MiB) | < 200 B |")
print(f"| explicit purge of 100,000 files | {t3 - t2:.2f} s | < 2 s |")
print(f"| 4 KiB file writes into a full sandbox | {writes / (t5 - t4):.0f} files/s ({purges} purges) | |")
PY
