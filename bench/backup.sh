#!/usr/bin/env bash
# appbox backup against tar: a sandbox of --files files in Documents and Application
# Support (4 KiB on average, 100 a directory), plus a tenth as many in Library/Caches
# that a backup leaves out, mounted. Times `appbox backup` of the mount and a GNU tar of
# the same included files from the backing directory into the same filesystem, with a
# warm page cache for both (a first tar reads everything), and prints files per second,
# the ratio, and the backup's peak memory. `cp -a` of Documents and Library (one file
# per file, as a backup makes; Caches included) is printed for reference.
#
# Usage: bench/backup.sh [--files N] [--dir DIR] [--appbox PATH]
#   --files N     included files (default 100000)
#   --dir DIR     where to work, on the disk to measure (default /tmp)
#   --appbox PATH the AppBox binary (default .build/release/appbox)
# Needs /dev/fuse, fusermount3, python3, tar, /usr/bin/time.
set -euo pipefail
FILES=100000 DIR=/tmp APPBOX=.build/release/appbox
while (($#)); do
  case $1 in
    --files) FILES=${2:?--files needs a number}; shift ;;
    --dir) DIR=${2:?--dir needs a directory}; shift ;;
    --appbox) APPBOX=${2:?--appbox needs a path}; shift ;;
    *) echo "usage: $0 [--files N] [--dir DIR] [--appbox PATH]" >&2; exit 64 ;;
  esac
  shift
done
[[ $FILES =~ ^[1-9][0-9]*$ ]] || { echo "backup: --files is a positive number" >&2; exit 64; }
for tool in fusermount3 python3 tar /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "backup: $tool is not installed" >&2; exit 1; }
done
[[ -x $APPBOX ]] || { echo "backup: no AppBox binary at $APPBOX (swift build -c release)" >&2; exit 1; }
APPBOX=$(realpath "$APPBOX")

WORK=$(mktemp -d "$DIR/appbox-backup-bench.XXXXXX")
export XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$XDG_RUNTIME_DIR" "$WORK/backing" "$WORK/mnt"
cleanup() {
  if mountpoint -q "$WORK/mnt" 2>/dev/null; then "$APPBOX" unmount "$WORK/mnt" || fusermount3 -u "$WORK/mnt" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 - "$WORK/backing" "$FILES" <<'PY'
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
"$APPBOX" mount --unlocked --backing "$WORK/backing" "$WORK/mnt"

included=(Documents Library/Application\ Support Library/Preferences)
tar -cf "$WORK/warm.tar" -C "$WORK/backing" "${included[@]}" && rm "$WORK/warm.tar"
sync

seconds() { python3 -c 'import sys; print(float(sys.argv[1]))' "$1"; }
start=$(date +%s.%N)
tar -cf "$WORK/backup.tar" -C "$WORK/backing" "${included[@]}"
sync -f "$WORK"
tar_s=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
rm "$WORK/backup.tar"
sync

# cp -a makes one file per file, as the backup does (tar appends to one).
start=$(date +%s.%N)
mkdir "$WORK/copy"
cp -a "$WORK/backing/Documents" "$WORK/backing/Library" "$WORK/copy/"
sync -f "$WORK"
cp_s=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
rm -rf "$WORK/copy"
sync

start=$(date +%s.%N)
/usr/bin/time -f '%M' -o "$WORK/rss" "$APPBOX" backup "$WORK/mnt" --to "$WORK/ios-backup" --json >"$WORK/report.json"
sync -f "$WORK"
backup_s=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")

python3 - "$FILES" "$tar_s" "$backup_s" "$(cat "$WORK/rss")" "$WORK/report.json" "$cp_s" <<'PY'
import json, sys
files, tar_s, backup_s, rss_kib = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
report = json.load(open(sys.argv[5]))
cp_s = float(sys.argv[6])
assert report["included"]["files"] == files, report["included"]
print(f"files backed up:   {files} ({report['included']['bytes'] / 2**20:.0f} MiB; Caches left out: {report['caches']['files']} files)")
print(f"tar:               {tar_s:7.2f} s  {files / tar_s:9.0f} files/s")
print(f"cp -a (reference): {cp_s:7.2f} s  {files / cp_s:9.0f} files/s  (Documents and all of Library)")
print(f"appbox backup:     {backup_s:7.2f} s  {files / backup_s:9.0f} files/s")
print(f"backup / tar time: {backup_s / tar_s:7.2f}")
print(f"backup peak RSS:   {rss_kib / 1024:7.1f} MiB")
PY
