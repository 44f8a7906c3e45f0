#!/usr/bin/env bash
# The policy's share of the daemon's CPU time (target: under 5%): lock checks, quota
# reservations and accounting, the purge catalog and LRU, protection classes. perf samples
# the daemon's stacks while four workloads run on a fresh ext4; a sample counts as policy
# when a policy function is on its stack. Code the compiler inlined into a handler counts
# as the handler's, so the figures are a floor.
#
# Usage: bench/policy-cost.sh [--appbox PATH]
# Needs root, /dev/fuse, perf (linux-perf), fio, python3, tar, mkfs.ext4.
set -euo pipefail
APPBOX=.build/release/appbox
while (($#)); do
  case $1 in
    --appbox) APPBOX=${2:?--appbox needs a path}; shift ;;
    *) echo "usage: $0 [--appbox PATH]" >&2; exit 64 ;;
  esac
  shift
done
for tool in perf fio python3 tar mkfs.ext4; do
  command -v "$tool" >/dev/null || { echo "policy-cost: $tool is not installed" >&2; exit 1; }
done
[[ -x $APPBOX ]] || { echo "policy-cost: no AppBox binary at $APPBOX (swift build -c release)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/appbox-policy.XXXXXX)
export XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$XDG_RUNTIME_DIR" "$WORK/fs"
DAEMON=
cleanup() {
  if mountpoint -q "$WORK/fs/mnt" 2>/dev/null; then fusermount3 -u "$WORK/fs/mnt" || true; fi
  if [[ -n $DAEMON ]]; then
    for _ in $(seq 100); do kill -0 "$DAEMON" 2>/dev/null || break; sleep 0.1; done
  fi
  if mountpoint -q "$WORK/fs" 2>/dev/null; then umount "$WORK/fs"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

truncate -s 2G "$WORK/fs.img"
mkfs.ext4 -q -F "$WORK/fs.img"
mount -o loop "$WORK/fs.img" "$WORK/fs"
mkdir -p "$WORK/fs/backing" "$WORK/fs/mnt"
"$APPBOX" mount --unlocked --backing "$WORK/fs/backing" "$WORK/fs/mnt"
DAEMON=$(cat "$XDG_RUNTIME_DIR"/appbox/*.pid)
MNT=$WORK/fs/mnt
TREE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')

# Prints "WORKLOAD: k of n samples on policy code (p%)" for a perf recording.
share() {
  perf script -i "$2" -F ip,sym 2>/dev/null | python3 -c '
import re, sys
policy = re.compile(
    r"AccessRule|LockSnapshot|LockStateMachine|QuotaLedger|PurgeCatalog|StorageState"
    r"|SandboxFilesystemC(5check|13checkCanCreate|14checkCanRemove|7account|5touch"
    r"|15reserveForWrite|7reserve|10reserveAll|9unreserve|5track|7untrack"
    r"|15protectionClass|16assignProtection|14catalogParent|6opened|6closed)")
samples = on_policy = 0
frames = []
for line in list(sys.stdin) + [""]:
    line = line.strip()
    if line:
        frames.append(line)
    elif frames:
        samples += 1
        on_policy += any(policy.search(frame) for frame in frames)
        frames = []
print(f"{sys.argv[1]:<28} {on_policy:>6} of {samples:>6} samples on policy code ({100 * on_policy / max(samples, 1):.1f}%)")
' "$1"
}

record() { # label command...
  local label=$1 data=$WORK/perf.data
  shift
  perf record -q -g -F 10000 -p "$DAEMON" -o "$data" -- "$@" >/dev/null 2>&1
  share "$label" "$data"
  rm -f "$data"
}

record "create/stat/unlink 10,000" python3 bench/metaops.py "$MNT/Documents/meta" 10000
mkdir -p "$MNT/Library/Caches/tree"
record "untar (Caches)" tar -xf <(tar -cf - -C "$(dirname "$TREE")" "$(basename "$TREE")") -C "$MNT/Library/Caches/tree"
record "4 KiB random writes (Caches)" fio --name=randwrite --filename="$MNT/Library/Caches/fio" --size=256M --bs=4k \
  --rw=randwrite --ioengine=psync --runtime=10 --time_based --end_fsync=1
record "rm -rf (Caches)" rm -rf "$MNT/Library/Caches/tree"
