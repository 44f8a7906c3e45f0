#!/usr/bin/env bash
# What making passthrough files revocable costs the read path (issue 15, item 3): every
# file registered for passthrough is armed with a fanotify mark whose ignore mask drops
# each read's permission event inside the kernel, and disarmed at its last close.
# Three workloads on warm caches, on the same fresh ext4 image (loop device): natively,
# on a mount of this build, and (with --baseline) on a mount of an earlier build without
# the marks:
#   open-read-close  open, read 4 KiB, close, for each of FILES files (arm + disarm each)
#   pread 4 KiB      READS preads of 4 KiB at offset 0 of one open file (the per-read check)
#   read 1 MiB       a 256 MiB file read through with 1 MiB reads
# Rounds alternate the targets; prints medians (min–max) and ratios. Not a test: figures
# only. Needs root (mkfs, losetup, mount), /dev/fuse, python3.
#
#   bench/passthrough-revocation.sh [--files N] [--reads N] [--runs N] [--dir DIR]
#                                   [--binary PATH] [--baseline PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
files=5000
reads=200000
runs=7
dir=/var/tmp
binary=.build/release/appbox
baseline=""
. bench/options.sh
bench_options files reads runs dir binary baseline -- "$@"
whole files reads runs
need_root "mkfs, losetup, mount"
appbox_release
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "passthrough-revocation: no binary at $baseline" >&2; exit 66; }

. bench/fresh-ext4.sh
scratch "$dir" appbox-revocation
base=$SCRATCH
fs=$base/fs
fresh_ext4 4G "$fs"

targets=(native "$fs/native")
roots=("$fs/native")
[ -n "$baseline" ] && roots+=("$fs/baseline")
roots+=("$fs/appbox")
python3 - "$files" "${roots[@]}" <<'PY'
import os, sys
files = int(sys.argv[1])
for root in sys.argv[2:]:
    small = os.path.join(root, "Documents", "small")
    os.makedirs(small)
    for i in range(files):
        with open(os.path.join(small, "f%05d" % i), "wb") as f:
            f.write(os.urandom(4096))
    with open(os.path.join(root, "Documents", "big"), "wb") as f:
        for _ in range(256):
            f.write(os.urandom(1 << 20))
PY
mount_one() {  # mount_one NAME BINARY
  mkdir -p "$base/mnt-$1"
  "$2" mount --backing "$fs/$1" --unlocked --capacity 3G "$base/mnt-$1"
  SCRATCH_MOUNTS+=("$base/mnt-$1")
  targets+=("$1" "$base/mnt-$1")
}
[ -n "$baseline" ] && mount_one baseline "$baseline"
mount_one appbox "$binary"

python3 - "$runs" "$reads" "${targets[@]}" <<'PY'
import os, statistics, sys, time
runs, reads = int(sys.argv[1]), int(sys.argv[2])
targets = list(zip(sys.argv[3::2], sys.argv[4::2]))
def open_read_close(root):
    small = os.path.join(root, "Documents", "small")
    names = sorted(os.listdir(small))
    t = time.perf_counter()
    for name in names:
        fd = os.open(os.path.join(small, name), os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)
    return (time.perf_counter() - t) / len(names) * 1e6, "µs per file"
def pread_small(root):
    fd = os.open(os.path.join(root, "Documents", "big"), os.O_RDONLY)
    t = time.perf_counter()
    for _ in range(reads):
        os.pread(fd, 4096, 0)
    elapsed = time.perf_counter() - t
    os.close(fd)
    return elapsed / reads * 1e6, "µs per read"
def read_big(root):
    fd = os.open(os.path.join(root, "Documents", "big"), os.O_RDONLY)
    t = time.perf_counter()
    while os.read(fd, 1 << 20):
        pass
    elapsed = time.perf_counter() - t
    os.close(fd)
    return 256 / elapsed, "MiB/s"
workloads = [("open-read-close", open_read_close), ("pread 4 KiB", pread_small), ("read 1 MiB", read_big)]
for _, root in targets:  # warm every cache once
    for _, work in workloads:
        work(root)
results = {(w, t): [] for w, _ in workloads for t, _ in targets}
units = {}
for run in range(runs):
    order = targets if run % 2 == 0 else targets[::-1]
    for name, work in workloads:
        for target, root in order:
            value, units[name] = work(root)
            results[(name, target)].append(value)
names = [t for t, _ in targets]
print(f"{runs} runs, warm caches, one fresh ext4 image; medians (min–max)")
print("| workload | " + " | ".join(names) + " | appbox / native |" + (" appbox / baseline |" if "baseline" in names else ""))
print("|---|" + "---:|" * (len(names) + 1 + ("baseline" in names)))
for name, _ in workloads:
    cells = []
    for target in names:
        v = results[(name, target)]
        cells.append(f"{statistics.median(v):,.2f} ({min(v):,.2f}–{max(v):,.2f})")
    med = {t: statistics.median(results[(name, t)]) for t in names}
    row = f"| {name} ({units[name]}) | " + " | ".join(cells) + f" | {med['appbox'] / med['native']:.2f} |"
    if "baseline" in names:
        row += f" {med['appbox'] / med['baseline']:.3f} |"
    print(row)
PY
