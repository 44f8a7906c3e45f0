#!/usr/bin/env bash
# A device against one app (issue 27): the same number of cache files, 1 byte each (one
# 4 KiB block), either in one app's Library/Caches (FILES = APPS x PER-APP, default
# 1,000,000) or spread over APPS apps of a device mount (default 50 x 20,000), both trees
# on one fresh ext4 image. Per run, for each (in alternating order): the mount with its
# index, cold (drop_caches first), then an explicit purge of PURGE files (default 100,000),
# which on the device takes them from every app's cache in the device's one order; then
# the purged files are made again. Prints the medians and the device's ratio to the one
# app (targets: 1.2 or less). Not a test: figures only. Needs root (mkfs, losetup,
# mount, drop_caches), /dev/fuse, python3.
#
#   bench/device-scale.sh [--apps N] [--per-app N] [--purge N] [--runs N] [--dir DIR] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
apps=50
per_app=20000
purge=100000
runs=3
dir=/var/tmp
binary=.build/release/appbox
. bench/options.sh
bench_options apps per-app purge runs dir binary -- "$@"
whole apps per_app purge runs
files=$((apps * per_app))
((purge <= files)) || { echo "device-scale: --purge is more than the $files files" >&2; exit 64; }
need_root "mkfs, losetup, mount, drop_caches"
appbox_release

. bench/fresh-ext4.sh
scratch "$dir" appbox-device-scale
fs=$SCRATCH/fs
# Two trees of FILES one-block files, their inodes and directories: about 9 GiB per
# million files, an inode per 4 KiB; the image is sparse.
fresh_ext4 "$(((files * 9 + 999999) / 1000000 + 2))G" "$fs" -i 4096
mnt=$SCRATCH/mnt
mkdir -p "$mnt" "$fs/single/Library/Caches" "$fs/device"
SCRATCH_MOUNTS+=("$mnt")
capacity=$(((files + 100000) * 4096 + (1 << 30)))

# The device's apps, installed through AppBox (their containers and metadata), then both
# trees filled the same way: 1,000 files a directory, named by number.
"$binary" mount --device --backing "$fs/device" --capacity "$capacity" "$mnt"
for ((i = 0; i < apps; i++)); do "$binary" app install "$mnt" "com.bench.app$i" >/dev/null; done
"$binary" unmount "$mnt"
fill() {  # fill MISSING-ONLY: makes the files of both trees (only the missing ones when 1)
  python3 - "$fs" "$apps" "$per_app" "$1" <<'PY'
import os, sys
fs, apps, per_app, missing_only = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
def make(root, first, count):
    for i in range(first, first + count):
        d = os.path.join(root, "d%04d" % (i // 1000))
        if i % 1000 == 0 or i == first:
            os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "cache-file-%08d.bin" % i)
        if missing_only and os.path.exists(path):
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.close(fd)
make(os.path.join(fs, "single/Library/Caches"), 0, apps * per_app)
for app in range(apps):
    make(os.path.join(fs, "device/Containers/Data/Application/com.bench.app%d/Library/Caches" % app), app * per_app, per_app)
PY
}
echo "device-scale: making $files files in each tree..." >&2
fill 0

measure() {  # measure TARGET: prints "TARGET MOUNT-SECONDS PURGE-SECONDS FILES-PURGED"
  local target=$1 options=()
  [ "$target" = device ] && options=(--device)
  sync
  echo 3 >/proc/sys/vm/drop_caches
  local t0 t1 t2 out
  t0=$(date +%s.%N)
  "$binary" mount "${options[@]}" --backing "$fs/$target" --capacity "$capacity" --unlocked "$mnt"
  t1=$(date +%s.%N)
  out=$("$binary" purge "$mnt" --bytes $((purge * 4096)))
  t2=$(date +%s.%N)
  "$binary" unmount "$mnt"
  echo "$target $(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc) $(echo "$out" | awk '{print $2}')"
}

results=$SCRATCH/results
for ((run = 0; run < runs; run++)); do
  if ((run % 2 == 0)); then order=(single device); else order=(device single); fi
  for target in "${order[@]}"; do measure "$target" >>"$results"; done
  fill 1
done

python3 - "$results" "$apps" "$per_app" "$purge" "$runs" "$FRESH_LOOP" <<'PY'
import statistics, sys
path, apps, per_app, purge, runs, loop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [line.split() for line in open(path)]
def values(target, column):
    return [float(row[column]) for row in rows if row[0] == target]
for row in rows:
    if int(row[3].replace(",", "")) != purge:
        print(f"warning: {row[0]} purged {row[3]} files, not {purge:,}", file=sys.stderr)
files = apps * per_app
print(f"{runs} runs, medians; ext4 on {loop}; one app of {files:,} cache files against {apps} apps of {per_app:,}")
print()
print("| measure | one app | device | device / one app | per run | target |")
print("|---|---:|---:|---:|---:|---:|")
for name, column in (("mount with index (cold cache)", 1), (f"explicit purge of {purge:,} files", 2)):
    singles, devices = values("single", column), values("device", column)
    single, device = statistics.median(singles), statistics.median(devices)
    ratios = sorted(d / s for s, d in zip(singles, devices))
    print(f"| {name} | {single:.2f} s | {device:.2f} s | {device / single:.2f} | {ratios[0]:.2f}–{ratios[-1]:.2f} | ≤ 1.2 |")
PY
