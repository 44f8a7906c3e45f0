#!/usr/bin/env bash
# Where a request's time in the daemon goes: for each daemon, the time a ring worker spends
# on one request, from the io_uring_enter that hands it the request to the io_uring_enter
# that commits the reply, split into its system calls and the user-space work between them.
#
# Usage: sudo bench/request-timeline.sh [--files N] [--rounds N] [--dir DIR]
#                                       [--appbox NAME=PATH]... [--passthrough-hp PATH]
#
# Every target is mounted over FUSE over io_uring (this writes 1 to
# /sys/module/fuse/parameters/enable_uring and puts back what was there on exit), each on
# a fresh ext4 image of its own (bench/fresh-ext4.sh). --appbox (repeatable; default
# appbox=.build/release/appbox) names AppBox builds; --passthrough-hp libfuse's
# example/passthrough_hp (bench/README.md says how to build it; default $PASSTHROUGH_HP,
# none if unset). Per round, in rotating order, each target creates N empty files (a
# Python loop: open, close) and then unlinks them, while `perf record` takes the
# raw_syscalls tracepoints of the daemon's threads. A request is told by its system calls:
# an unlink is the request whose calls include `unlinkat`, a create the one with two
# `openat`s. Printed per target and request: the medians over all rounds of the time in
# the daemon, the user-space time before the first call, each call's duration and the
# user-space time after each call. The tracepoints add about 0.1-0.2 µs to each call and
# to each gap: compare targets with each other, not with round trips measured otherwise.
# Needs root, /dev/fuse, a kernel with FUSE over io_uring, perf (linux-perf), python3.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"
files=5000
rounds=3
dir=/var/tmp
passthrough_hp=${PASSTHROUGH_HP:-}
builds=()
while (($#)); do
  case $1 in
    --files) files=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --dir) dir=${2:?}; shift 2 ;;
    --appbox) [[ ${2:-} == ?*=?* ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
      builds+=("$2"); shift 2 ;;
    --passthrough-hp) passthrough_hp=${2:?}; shift 2 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64 ;;
  esac
done
[[ $files =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] || { echo "request-timeline: --files and --rounds take whole numbers" >&2; exit 64; }
((${#builds[@]})) || builds=("appbox=$REPO/.build/release/appbox")
[[ $(id -u) == 0 ]] || { echo "request-timeline: run as root (tracepoints, mounts)" >&2; exit 77; }
command -v perf >/dev/null || { echo "request-timeline: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
for b in "${builds[@]}"; do [[ -x ${b#*=} ]] || { echo "request-timeline: no AppBox binary at ${b#*=}" >&2; exit 1; }; done
[[ -z $passthrough_hp || -x $passthrough_hp ]] || { echo "request-timeline: no passthrough_hp at $passthrough_hp" >&2; exit 1; }
switch=/sys/module/fuse/parameters/enable_uring
[[ -w $switch ]] || { echo "request-timeline: this kernel has no FUSE over io_uring ($switch)" >&2; exit 1; }
was=$(cat "$switch")

base=$(mktemp -d "$dir/appbox-request-timeline.XXXXXX")
declare -A PID MNT LOOP
names=()
finish() {
  for t in "${names[@]}"; do
    fusermount3 -u "${MNT[$t]}" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "${PID[$t]}" 2>/dev/null || break; sleep 0.1; done
    umount "$base/$t/fs" 2>/dev/null || true
    [[ -n ${LOOP[$t]:-} ]] && losetup -d "${LOOP[$t]}" 2>/dev/null || true
  done
  rm -rf "$base"
  [[ $was == Y ]] && echo 1 >"$switch" || echo 0 >"$switch"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo 1 >"$switch"

# image NAME: a fresh ext4 on $base/NAME/fs.
image() {
  mkdir -p "$base/$1/fs" "$base/$1/mnt"
  truncate -s 4G "$base/$1/fs.img"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$base/$1/fs.img"
  LOOP[$1]=$(losetup --find --show --direct-io=on "$base/$1/fs.img")
  mount "${LOOP[$1]}" "$base/$1/fs"
  MNT[$1]=$base/$1/mnt
}
for b in "${builds[@]}"; do
  t=${b%%=*} binary=${b#*=}
  names+=("$t")
  image "$t"
  mkdir -p "$base/$t/fs/backing" "$base/$t/run"
  XDG_RUNTIME_DIR=$base/$t/run "$binary" mount --unlocked --transport io-uring --backing "$base/$t/fs/backing" "${MNT[$t]}"
  PID[$t]=$(cat "$base/$t/run"/appbox/*.pid)
  in_use=$(XDG_RUNTIME_DIR=$base/$t/run "$binary" status --json "${MNT[$t]}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["transport"]["inUse"])')
  [[ $in_use == io-uring ]] || { echo "request-timeline: $t fell back to $in_use" >&2; exit 1; }
done
if [[ -n $passthrough_hp ]]; then
  t=passthrough_hp
  names+=("$t")
  image "$t"
  mkdir -p "$base/$t/fs/src/Documents"
  "$passthrough_hp" -o io_uring --foreground "$base/$t/fs/src" "${MNT[$t]}" >"$base/$t.log" 2>&1 &
  PID[$t]=$!
  for _ in $(seq 100); do mountpoint -q "${MNT[$t]}" && break; sleep 0.1; done
  grep -qs '^fuse-ring-' /proc/"${PID[$t]}"/task/*/comm || { echo "request-timeline: passthrough_hp is not on io_uring" >&2; exit 1; }
fi

loop='import os, sys
d, n, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(n):
    name = f"{d}/f{i:07d}"
    if what == "create": os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    else: os.unlink(name)'
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#names[@]}; k++)); do
    t=${names[$(((k + r) % ${#names[@]}))]}
    d=${MNT[$t]}/Documents/r$r
    mkdir -p "$d"
    for what in create unlink; do
      perf record -q -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -p "${PID[$t]}" -o "$base/$t.$r.$what.data" \
        >/dev/null 2>&1 &
      recorder=$!
      sleep 0.5
      python3 -c "$loop" "$d" "$files" "$what"
      kill -INT "$recorder"
      wait "$recorder" 2>/dev/null || true
      perf script --ns -i "$base/$t.$r.$what.data" -F tid,time,event,trace >>"$base/$t.$what.events" 2>/dev/null
      rm -f "$base/$t.$r.$what.data"
    done
    rmdir "$d"
  done
done

echo "per request, medians over $rounds rounds of $files files (µs; u: user-space time, in parentheses a call; fstatat is also an fstat, with an empty path)"
for t in "${names[@]}"; do
  python3 - "$t" "$base/$t.create.events" "$base/$t.unlink.events" <<'PY'
import re, statistics, sys
from collections import defaultdict
NAMES = {0: "read", 3: "close", 16: "ioctl", 32: "dup", 257: "openat", 262: "fstatat", 263: "unlinkat", 186: "gettid"}
event = re.compile(r"^\s*(\d+)\s+([0-9.]+):\s+raw_syscalls:sys_(enter|exit): NR (\d+)")
def requests(path):
    """Each ring request: its calls and the times between the ring's two io_uring_enters."""
    threads = defaultdict(list)
    for line in open(path):
        if m := event.match(line):
            threads[m[1]].append((float(m[2]), m[3], int(m[4])))
    found = []
    for events in threads.values():
        current = None
        for time, kind, nr in events:
            if nr == 426 and kind == "exit":
                current = {"marks": [time], "calls": []}
            elif current is not None:
                current["marks"].append(time)
                if nr == 426:
                    found.append(current)
                    current = None
                elif kind == "enter":
                    current["calls"].append(nr)
    return found
name = sys.argv[1]
for what, path, picks in (("create", sys.argv[2], lambda c: c.count(257) == 2),
                          ("unlink", sys.argv[3], lambda c: 263 in c)):
    shapes = defaultdict(list)
    for r in requests(path):
        if picks(r["calls"]) and len(r["marks"]) == 2 * len(r["calls"]) + 2:
            shapes[tuple(r["calls"])].append(r["marks"])
    if not shapes:
        print(f"{name:>16} {what}: no request found")
        continue
    calls, marks = max(shapes.items(), key=lambda kv: len(kv[1]))
    med = lambda i: statistics.median(m[i + 1] - m[i] for m in marks) * 1e6
    total = statistics.median(m[-1] - m[0] for m in marks) * 1e6
    parts = [f"u {med(0):.2f}"]
    for i, nr in enumerate(calls):
        parts += [f"({NAMES.get(nr, nr)} {med(2 * i + 1):.2f})", f"u {med(2 * i + 2):.2f}"]
    print(f"{name:>16} {what}: {total:.2f} in the daemon ({len(marks)} requests): " + " ".join(parts))
PY
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
