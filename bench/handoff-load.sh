#!/usr/bin/env bash
# The CPU handoff under load: an untar through AppBox over FUSE over io_uring while busy
# loops compete for the CPUs, with the handoff (each --appbox build) and without it (the
# first build with --no-cpu-handoff). A worker that hands off is a SCHED_IDLE thread, which
# gets almost no CPU beside a busy thread of its own scheduling group: this measures what
# that costs an untar when the loops run from the start ("during") and when they start
# half a second into it ("mid", after the handoff may have turned on), against no loops.
#
# Usage: sudo bench/handoff-load.sh [--rounds N] [--loops N] [--dir DIR] [--appbox NAME=PATH]...
#
# Each untar (the benchmark's tree: python's standard library and Debian's python
# packages, then sync) runs on a fresh ext4 image of its own (bench/fresh-ext4.sh), rounds
# rotating the targets. --loops (default 4) shell loops run unpinned; the kernel's
# autogroups are off meanwhile (sched_autogroup_enabled, put back on exit), so that the
# loops share the daemon's scheduling group, the worst case. Printed per target and load:
# the median untar time and, summed over the rounds, the replies handed off and the
# stalls that paused the handoff (appbox status). Needs root, /dev/fuse, a kernel with
# FUSE over io_uring (this writes 1 to /sys/module/fuse/parameters/enable_uring and puts
# back what was there on exit), python3, tar.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
rounds=3
loops=4
dir=/var/tmp
builds=()
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    --loops) loops=${2:?}; shift 2 ;;
    --dir) dir=${2:?}; shift 2 ;;
    --appbox) [[ ${2:-} == ?*=?* ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
      builds+=("$2"); shift 2 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ && $loops =~ ^[1-9][0-9]*$ ]] || { echo "handoff-load: --rounds and --loops take whole numbers" >&2; exit 64; }
((${#builds[@]})) || builds=("appbox=$REPO/.build/release/appbox")
for b in "${builds[@]}"; do
  [[ ${b%%=*} != no-handoff ]] || { echo "handoff-load: no-handoff names the first build without the handoff: name yours otherwise" >&2; exit 64; }
done
[[ $(id -u) == 0 ]] || { echo "handoff-load: run as root (mounts, the scheduler's settings)" >&2; exit 77; }
for b in "${builds[@]}"; do [[ -x ${b#*=} ]] || { echo "handoff-load: no AppBox binary at ${b#*=}" >&2; exit 1; }; done
switch=/sys/module/fuse/parameters/enable_uring
[[ -w $switch ]] || { echo "handoff-load: this kernel has no FUSE over io_uring ($switch)" >&2; exit 1; }
autogroup=/proc/sys/kernel/sched_autogroup_enabled
was_uring=$(cat "$switch")
was_autogroup=$(cat "$autogroup" 2>/dev/null || echo)

# Targets: NAME=PATH, and the first build again without the handoff.
targets=("${builds[@]}" "no-handoff=${builds[0]#*=}")

binary=${builds[0]#*=}  # for fresh-ext4.sh's unmounts
# shellcheck source=bench/fresh-ext4.sh
source "$HERE/fresh-ext4.sh"
scratch "$dir" appbox-handoff-load
LOOPS=()
finish() {
  for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
  scratch_remove
  [[ $was_uring == Y ]] && echo 1 >"$switch" || echo 0 >"$switch"
  [[ -n $was_autogroup ]] && echo "$was_autogroup" >"$autogroup" || true
}
trap finish EXIT
echo 1 >"$switch"
[[ -n $was_autogroup ]] && echo 0 >"$autogroup"

tarball=$SCRATCH/tree.tar
sources=()
for d in /usr/lib/python3.[0-9]* /usr/lib/python3/dist-packages; do [[ -d $d ]] && sources+=("${d#/}"); done
tar cf "$tarball" -C / "${sources[@]}" || { echo "handoff-load: could not make the tree's archive" >&2; exit 1; }

start_loops() { for ((i = 0; i < loops; i++)); do (while :; do :; done) & LOOPS+=($!); done; }
stop_loops() { for p in "${LOOPS[@]}"; do kill "$p"; done; wait "${LOOPS[@]}" 2>/dev/null || true; LOOPS=(); }

results=$SCRATCH/results
# untar TARGET LOAD: one untar on a fresh ext4; adds "name load seconds handoffs stalls"
# to the results.
untar() {
  local name=${1%%=*} program=${1#*=} load=$2 fs=$SCRATCH/fs mnt=$SCRATCH/mnt options=()
  [[ $name == no-handoff ]] && options=(--no-cpu-handoff)
  mkdir -p "$fs" "$mnt"
  fresh_ext4 4G "$fs" -i 4096
  mkdir "$fs/backing"
  "$program" mount --unlocked --transport io-uring "${options[@]}" --backing "$fs/backing" "$mnt" >/dev/null
  SCRATCH_MOUNTS=("$mnt")
  [[ $load == during ]] && start_loops
  local t0=$EPOCHREALTIME
  tar xf "$tarball" -C "$mnt/Documents" &
  local untarring=$!
  if [[ $load == mid ]]; then sleep 0.5; start_loops; fi
  wait "$untarring"
  sync -f "$mnt/Documents"
  local t1=$EPOCHREALTIME
  stop_loops
  "$program" status --json "$mnt" | python3 -c 'import json, sys
t = json.load(sys.stdin)["transport"]
if t["inUse"] != "io-uring": sys.exit("handoff-load: the mount fell back to " + t["inUse"])
print(sys.argv[1], sys.argv[2], f"{float(sys.argv[4]) - float(sys.argv[3]):.3f}", t["handoffs"], t["handoffStalls"])' \
    "$name" "$load" "$t0" "$t1" | tee -a "$results" >&2
  "$program" unmount "$mnt"
  SCRATCH_MOUNTS=()
  umount "$fs"
  losetup -d "$FRESH_LOOP"
  FRESH_DIR= FRESH_LOOP=
  rm -f "$SCRATCH/fs.img"
}

for ((r = 0; r < rounds; r++)); do
  for load in none during mid; do
    for ((k = 0; k < ${#targets[@]}; k++)); do untar "${targets[$(((k + r) % ${#targets[@]}))]}" "$load"; done
  done
done

echo "untar + sync with $loops busy loops in the daemon's scheduling group, $rounds rounds: median seconds; replies handed off and stalls, summed"
python3 - "$results" <<'PY'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    name, load, seconds, handoffs, stalls = line.split()
    runs[name, load].append((float(seconds), int(handoffs), int(stalls)))
names = list(dict.fromkeys(n for n, _ in runs))
print(f"{'target':<16}" + "".join(f"{load:>28}" for load in ("none", "during", "mid")))
for name in names:
    cells = []
    for load in ("none", "during", "mid"):
        r = runs[name, load]
        cells.append(f"{statistics.median(s for s, _, _ in r):.2f} s ({sum(h for _, h, _ in r)}, {sum(t for _, _, t in r)})")
    print(f"{name:<16}" + "".join(f"{c:>28}" for c in cells))
PY
