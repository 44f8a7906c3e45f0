#!/usr/bin/env bash
# Where the time of one unlink goes, request by request, and a CPU profile of the daemon
# on unlink and `rm -rf` (#26: count before cutting).
#
# Usage: sudo bench/unlink-profile.sh [--files N] [--transport dev-fuse|io-uring]
#                                     [--appbox PATH] [--dir DIR]
#
# On a fresh ext4 image (bench/fresh-ext4.sh), one AppBox mount: N empty files are made
# (untimed), then unlinked one by one by a Python loop, then a tree (python's standard
# library, as bench.sh's) is untarred (untimed) and removed with `rm -rf`. For each of the
# two phases it prints:
#   - the FUSE requests per file by operation (the daemon's own counters, forgets too);
#   - each operation's round trip in the kernel, median and 90th percentile (from the
#     fuse:fuse_request_send and fuse:fuse_request_end tracepoints: the kernel queuing the
#     request to the daemon's reply being taken), and its share of the phase's wall time;
#   - the wall time per file, and the daemon's CPU time per file (user and system, from
#     /proc/PID/stat);
#   - the daemon's hottest functions (perf record -F 4999 on its threads, self time).
# Needs root, /dev/fuse, perf (linux-perf), python3, tar; files stay in a scratch
# directory under DIR (default /var/tmp), removed on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
FILES=10000
TRANSPORT=dev-fuse
binary=$REPO/.build/release/appbox
DIR=/var/tmp
while (($#)); do
  case $1 in
    --files) FILES=${2:?}; shift ;;
    --transport) TRANSPORT=${2:?}; shift ;;
    --appbox) binary=${2:?}; shift ;;
    --dir) DIR=${2:?}; shift ;;
    *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 64 ;;
  esac
  shift
done
[[ $(id -u) == 0 ]] || { echo "unlink-profile: run as root (tracepoints, perf)" >&2; exit 1; }
command -v perf >/dev/null || { echo "unlink-profile: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
[[ -x $binary ]] || { echo "unlink-profile: no AppBox binary at $binary (swift build -c release)" >&2; exit 1; }

. "$HERE/fresh-ext4.sh"
scratch "$DIR" appbox-unlink-profile
fresh_ext4 4G "$SCRATCH/fs"
export XDG_RUNTIME_DIR=$SCRATCH/run
mkdir -p "$XDG_RUNTIME_DIR" "$SCRATCH/fs/backing" "$SCRATCH/mnt"
"$binary" mount --unlocked --transport "$TRANSPORT" --backing "$SCRATCH/fs/backing" "$SCRATCH/mnt"
SCRATCH_MOUNTS=("$SCRATCH/mnt")
status() { "$binary" status --json "$SCRATCH/mnt"; }
in_use=$(status | python3 -c 'import json, sys; print(json.load(sys.stdin)["transport"]["inUse"])')
[[ $in_use == "$TRANSPORT" ]] || { echo "unlink-profile: asked for $TRANSPORT, the mount uses $in_use" >&2; exit 1; }
pid=$(cat "$XDG_RUNTIME_DIR"/appbox/*.pid 2>/dev/null || true) # the only mount of this runtime directory
[[ -n $pid ]] || { echo "unlink-profile: cannot find the daemon" >&2; exit 1; }
# Unmounted and the daemon gone (its descriptors of the backing files closed) before the
# scratch filesystem is unmounted.
finish() {
  "$binary" unmount "$SCRATCH/mnt" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  scratch_remove
}
trap finish EXIT
minor=$(awk -v m="$SCRATCH/mnt" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo)
work=$SCRATCH/mnt/Documents

cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; } # utime + stime, in clock ticks

# phase NAME FILES COMMAND...: runs COMMAND traced and profiled, then prints the analysis.
phase() {
  local name=$1 files=$2
  shift 2
  local before cpu0 cpu1 t0 t1
  before=$(status)
  perf record -q -F 4999 -p "$pid" -o "$SCRATCH/$name.cpu" -- sleep 600 >/dev/null 2>&1 &
  local profiler=$!
  perf record -q -a -e fuse:fuse_request_send,fuse:fuse_request_end --filter "connection == $minor" \
    -o "$SCRATCH/$name.trace" -- sleep 600 >/dev/null 2>&1 &
  local tracer=$!
  sleep 1
  cpu0=$(cpu)
  t0=$EPOCHREALTIME
  "$@"
  t1=$EPOCHREALTIME
  cpu1=$(cpu)
  kill -INT "$profiler" "$tracer"
  wait "$profiler" "$tracer" 2>/dev/null || true
  perf script -i "$SCRATCH/$name.trace" -F time,event,trace >"$SCRATCH/$name.events" 2>/dev/null
  perf report -i "$SCRATCH/$name.cpu" --no-children --sort dso,symbol --stdio 2>"$SCRATCH/$name.report-errors" |
    grep -E '^ +[0-9]' | head -25 >"$SCRATCH/$name.top" || true
  [[ -s $SCRATCH/$name.top ]] || echo "  (no samples: $(tr '\n' ' ' <"$SCRATCH/$name.report-errors"))" >"$SCRATCH/$name.top"
  python3 - "$name" "$files" "$t0" "$t1" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" "$before" "$(status)" \
    "$SCRATCH/$name.events" "$SCRATCH/$name.top" <<'PY'
import json, re, statistics, sys
name, files, t0, t1, c0, c1, tick, before, after, events, top = sys.argv[1:]
files, wall = int(files), float(t1) - float(t0)
cpu = (int(c1) - int(c0)) / int(tick)
before, after = json.loads(before)["requests"], json.loads(after)["requests"]
counts = {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0)}
sent, trips = {}, {}
send = re.compile(r"([0-9.]+):\s+fuse:fuse_request_send:.*?req (\d+) opcode \d+ \(FUSE_(\w+)\)")
end = re.compile(r"([0-9.]+):\s+fuse:fuse_request_end:.*?req (\d+)")
for line in open(events):
    if m := send.search(line):
        sent[m[2]] = (float(m[1]), m[3].lower())
    elif (m := end.search(line)) and m[2] in sent:
        start, op = sent.pop(m[2])
        trips.setdefault(op, []).append((float(m[1]) - start) * 1e6)
print(f"\n== {name}: {files} files, {wall / files * 1e6:.1f} µs per file (wall), daemon CPU {cpu / files * 1e6:.1f} µs per file")
print(f"{'request':<14}{'per file':>9}{'median µs':>11}{'p90 µs':>9}{'share of wall':>15}")
for op in sorted(counts, key=lambda o: -counts[o]):
    t = sorted(trips.get(op, []))
    med = statistics.median(t) if t else None
    p90 = t[int(len(t) * 0.9)] if t else None
    share = sum(t) / 1e6 / wall if t else None
    print(f"{op:<14}{counts[op] / files:>9.2f}"
          + (f"{med:>11.1f}{p90:>9.1f}{share:>14.0%}" if t else f"{'(no reply)':>11}"))
print("daemon's hottest functions (self time):")
for line in open(top):
    print("  " + " ".join(line.split()))
PY
}

python3 -c 'import os, sys
for i in range(int(sys.argv[2])): os.close(os.open(f"{sys.argv[1]}/f{i:06d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))' \
  "$work" "$FILES"
sync
phase unlink "$FILES" python3 -c 'import os, sys
for i in range(int(sys.argv[2])): os.unlink(f"{sys.argv[1]}/f{i:06d}")' "$work" "$FILES"

sources=()
for d in /usr/lib/python3.[0-9]*; do [[ -d $d ]] && sources+=("${d#/}"); done
tar cf "$SCRATCH/tree.tar" -C / "${sources[@]}" 2>/dev/null
mkdir "$work/tree"
tar xf "$SCRATCH/tree.tar" -C "$work/tree"
sync
entries=$(find "$work/tree" | wc -l)
phase "rm -rf" "$entries" rm -rf "$work/tree"
echo
echo "transport: $TRANSPORT; $(uname -r), $(nproc) CPUs; AppBox $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)"
