#!/usr/bin/env bash
# appbox backup against tar: a sandbox of FILES files in Documents and Application
# Support (0–8 KiB, 100 a directory), plus a tenth as many in Library/Caches that a
# backup leaves out, mounted, on a fresh ext4 image (loop device). Each round times, on
# that filesystem and with a warm page cache:
#   tar            GNU tar of the included files from the backing directory to one file
#   cp -a          Documents and Library copied, one file per file as a backup makes
#                  (Caches included), for reference
#   appbox backup  of the mount, with its peak memory (RSS)
# each followed by sync, and removed before the next. Prints medians (min–max), files per
# second and the backup/tar ratio. Not a test: figures only. Needs root (mkfs, losetup,
# mount), /dev/fuse, python3, tar, /usr/bin/time.
#
#   bench/backup.sh [--files N] [--runs N] [--dir DIR] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
files=100000
runs=3
dir=/var/tmp
binary=.build/release/appbox
. bench/options.sh
bench_options files runs dir binary -- "$@"
whole files runs
need_root "mkfs, losetup, mount"
for tool in fusermount3 python3 tar /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "backup: $tool is not installed" >&2; exit 69; }
done
appbox_release
binary=$(realpath "$binary")

. bench/fresh-ext4.sh
scratch "$dir" appbox-backup-bench
base=$SCRATCH
fs=$base/fs
fresh_ext4 $(( (files / 50 + 2048) ))M "$fs"
export XDG_RUNTIME_DIR=$base/run
mkdir -p "$XDG_RUNTIME_DIR" "$fs/backing" "$base/mnt"

python3 - "$fs/backing" "$files" <<'PY'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
def fill(base, n):
    for i in range(n):
        d = os.path.join(root, base, "d%05d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%03d" % (i % 100)), "wb") as f:
            f.write(os.urandom(rng.randrange(0, 8192)))
fill("Documents", count - count // 4)
fill("Library/Application Support", count // 4)
fill("Library/Caches", count // 10)
os.makedirs(os.path.join(root, "Library/Preferences"), exist_ok=True)
os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
PY
"$binary" mount --unlocked --backing "$fs/backing" "$base/mnt"
SCRATCH_MOUNTS+=("$base/mnt")

included=(Documents "Library/Application Support" Library/Preferences)
tar -cf "$fs/warm.tar" -C "$fs/backing" "${included[@]}" && rm "$fs/warm.tar"
sync

# timed NAME COMMAND…: runs COMMAND, then syncs the filesystem; appends "NAME seconds".
timed() {
  local name=$1 start end
  shift
  start=$(date +%s%N)
  "$@"
  sync -f "$fs"
  end=$(date +%s%N)
  echo "$name $(( end - start ))" >>"$base/times"
}
for ((round = 1; round <= runs; round++)); do
  timed tar tar -cf "$fs/backup.tar" -C "$fs/backing" "${included[@]}"
  rm "$fs/backup.tar"; sync
  mkdir "$fs/copy"
  timed cp cp -a "$fs/backing/Documents" "$fs/backing/Library" "$fs/copy/"
  rm -rf "$fs/copy"; sync
  timed backup /usr/bin/time -f '%M' -a -o "$base/rss" \
    "$binary" backup "$base/mnt" --to "$fs/ios-backup" --json >"$base/report.json"
  rm -rf "$fs/ios-backup"; sync
  echo "round $round of $runs done" >&2
done

python3 - "$files" "$runs" "$base/times" "$base/rss" "$base/report.json" <<'PY'
import json, statistics, sys
files, runs = int(sys.argv[1]), int(sys.argv[2])
times = {}
for line in open(sys.argv[3]):
    name, ns = line.split()
    times.setdefault(name, []).append(int(ns) / 1e9)
rss = [int(line) / 1024 for line in open(sys.argv[4]) if line.strip().isdigit()]
report = json.load(open(sys.argv[5]))
assert report["included"]["files"] == files, report["included"]
def row(label, name, note=""):
    s = times[name]
    m = statistics.median(s)
    print(f"{label:<15}{m:8.2f} s ({min(s):.2f}–{max(s):.2f}) {files / m:9.0f} files/s{note}")
print(f"{files} files backed up ({report['included']['bytes'] / 2**20:.0f} MiB; "
      f"Caches left out: {report['caches']['files']} files); {runs} rounds on a fresh ext4 image, medians (min–max)")
row("tar", "tar")
row("cp -a", "cp", "  (Documents and all of Library)")
row("appbox backup", "backup")
ratios = sorted(b / t for b, t in zip(times["backup"], times["tar"]))
print(f"backup / tar time: {statistics.median(ratios):.2f} ({ratios[0]:.2f}–{ratios[-1]:.2f})")
print(f"backup peak RSS:   {statistics.median(rss):.1f} MiB ({min(rss):.1f}–{max(rss):.1f})")
PY
