#!/usr/bin/env bash
# Moving a directory between domains (issue 15, item 6): one rename of a directory of
# FILES files (default 10,000, 4 KiB each) from tmp to Documents and back, on the mount
# and natively, on the same fresh filesystem (an ext4 image on a loop device, or a tmpfs
# with --tmpfs). Rounds alternate the two, so load from other work hits both alike.
# Prints the medians of each direction and AppBox's ratio to the native rename (AppBox
# walks the subtree twice: its cost is O(files)). With --copy, also one `cp -a` + `rm -rf`
# of the same directory on the mount: what `mv` did when the rename said EXDEV.
# Not a test: figures only. Needs root (mkfs, losetup, mount), /dev/fuse, python3.
#
#   bench/domain-move.sh [--files N] [--runs N] [--dir DIR] [--tmpfs] [--copy] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
files=10000
runs=11
dir=/var/tmp
tmpfs=0
copy=0
binary=.build/release/appbox
. bench/options.sh
bench_options files runs dir tmpfs! copy! binary -- "$@"
whole files runs
need_root "mkfs, losetup, mount"
appbox_release

. bench/fresh-ext4.sh
scratch "$dir" appbox-domain-move
base=$SCRATCH
fs=$base/fs
if ((tmpfs)); then
  mkdir -p "$fs"
  mount -t tmpfs -o size=2G tmpfs "$fs"
  FRESH_DIR=$fs
  kind=tmpfs
else
  fresh_ext4 2G "$fs"
  kind="ext4 on $FRESH_LOOP"
fi

# The same tree twice on the one filesystem: natively, and in the sandbox's backing tree
# (made before the mount, which indexes it).
python3 - "$fs/native/tmp/download" "$fs/backing/tmp/download" "$files" <<'PY'
import os, sys
block = b"x" * 4096
for root in sys.argv[1:3]:
    os.makedirs(root)
    per = 1000
    for i in range(int(sys.argv[3])):
        d = os.path.join(root, "d%03d" % (i // per))
        if i % per == 0:
            os.mkdir(d)
        fd = os.open(os.path.join(d, "file-%06d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, block)
        os.close(fd)
PY
mkdir -p "$fs/native/Documents" "$base/mnt"
mnt=$base/mnt
SCRATCH_MOUNTS+=("$mnt")
"$binary" mount --backing "$fs/backing" --unlocked --capacity 1G "$mnt"

python3 - "$fs/native" "$mnt" "$runs" "$files" "$kind" <<'PY'
import os, statistics, sys, time
native, mount, runs, files, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def move(root, src, dst):
    t = time.perf_counter()
    os.rename(os.path.join(root, src), os.path.join(root, dst))
    return time.perf_counter() - t
times = {(t, d): [] for t in ("native", "appbox") for d in ("in", "out")}
for run in range(runs):
    for target, root in (("native", native), ("appbox", mount)) if run % 2 == 0 else (("appbox", mount), ("native", native)):
        times[(target, "in")].append(move(root, "tmp/download", "Documents/download"))
        times[(target, "out")].append(move(root, "Documents/download", "tmp/download"))
def ms(values): return statistics.median(values) * 1000
print(f"{files:,} files of 4 KiB in {(files + 999) // 1000 + 1} directories, {runs} runs, {kind}; medians (min–max):")
print("| rename | native | appbox | appbox / native |")
print("|---|---:|---:|---:|")
for direction, label in (("in", "tmp → Documents"), ("out", "Documents → tmp")):
    n, a = times[("native", direction)], times[("appbox", direction)]
    print(f"| {label} | {ms(n):.3f} ms ({min(n)*1000:.3f}–{max(n)*1000:.3f}) "
          f"| {ms(a):.1f} ms ({min(a)*1000:.1f}–{max(a)*1000:.1f}) | {ms(a)/ms(n):,.0f}× |")
PY

if ((copy)); then
  # What `mv` did while the rename said EXDEV: copy, then remove.
  t0=$(date +%s.%N)
  cp -a "$mnt/tmp/download" "$mnt/Documents/download" && rm -rf "$mnt/tmp/download"
  t1=$(date +%s.%N)
  python3 -c 'import sys; print(f"copy + remove on the mount (the EXDEV fallback), once: {float(sys.argv[2]) - float(sys.argv[1]):.2f} s")' "$t0" "$t1"
fi
