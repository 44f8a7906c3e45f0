#!/usr/bin/env bash
# Busy polling's effect, in alternating rounds in one run: AppBox polling (--busy-poll 30),
# AppBox not polling (--busy-poll 0) and bindfs, each over its own directory of one tmpfs
# (so that the backing filesystem's own work is small and steady and the round trips
# show). Each round runs, on each target in turn (rotating the order): create, stat and
# unlink of --files empty files (bench/metaops.py), then an untar of 4,000 files of
# python's standard library and its rm -rf. Prints the medians, the ratios to bindfs, and
# the CPU time each daemon spent per workload.
#
# Usage: bench/busy-poll.sh [--rounds N] [--files N] [--one-cpu] [--appbox PATH]
#   --rounds N    alternating rounds (default 11)
#   --files N     files per create/stat/unlink round (default 5000)
#   --one-cpu     run the daemons and the workloads on CPU 0 only
#   --appbox PATH the AppBox binary (default .build/release/appbox)
# Needs root, /dev/fuse, bindfs, fusermount3, python3, tar.
set -euo pipefail
ROUNDS=11 FILES=5000 ONE_CPU=0 APPBOX=.build/release/appbox
while (($#)); do
  case $1 in
    --rounds) ROUNDS=${2:?--rounds needs a number}; shift ;;
    --files) FILES=${2:?--files needs a number}; shift ;;
    --one-cpu) ONE_CPU=1 ;;
    --appbox) APPBOX=${2:?--appbox needs a path}; shift ;;
    *) echo "usage: $0 [--rounds N] [--files N] [--one-cpu] [--appbox PATH]" >&2; exit 64 ;;
  esac
  shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $FILES =~ ^[1-9][0-9]*$ ]] || { echo "busy-poll: --rounds and --files are positive numbers" >&2; exit 64; }
for tool in bindfs fusermount3 python3 tar taskset; do
  command -v "$tool" >/dev/null || { echo "busy-poll: $tool is not installed" >&2; exit 1; }
done
[[ -x $APPBOX ]] || { echo "busy-poll: no AppBox binary at $APPBOX (swift build -c release)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/appbox-busy-poll.XXXXXX)
export XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$XDG_RUNTIME_DIR" "$WORK/fs"
mount -t tmpfs -o size=4G tmpfs "$WORK/fs"
declare -A PID
cleanup() {
  for target in polling not-polling bindfs; do
    if mountpoint -q "$WORK/fs/$target/mnt" 2>/dev/null; then fusermount3 -u "$WORK/fs/$target/mnt" || true; fi
  done
  for pid in "${PID[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  umount "$WORK/fs" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PIN=()
((ONE_CPU)) && PIN=(taskset -c 0)
start_appbox() { # target window
  mkdir -p "$WORK/fs/$1/backing" "$WORK/fs/$1/mnt"
  "${PIN[@]}" "$APPBOX" mount --unlocked --busy-poll "$2" --backing "$WORK/fs/$1/backing" "$WORK/fs/$1/mnt"
  local file pid
  for file in "$XDG_RUNTIME_DIR"/appbox/*.pid; do # the one daemon not seen yet
    pid=$(cat "$file")
    [[ " ${PID[*]} " == *" $pid "* ]] || PID[$1]=$pid
  done
}
start_appbox polling 30
start_appbox not-polling 0
mkdir -p "$WORK/fs/bindfs/backing/Documents" "$WORK/fs/bindfs/mnt"
"${PIN[@]}" bindfs -f "$WORK/fs/bindfs/backing" "$WORK/fs/bindfs/mnt" &
PID[bindfs]=$!
for _ in $(seq 100); do mountpoint -q "$WORK/fs/bindfs/mnt" && break; sleep 0.1; done

TREE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
(cd "$(dirname "$TREE")" && find "$(basename "$TREE")" -path '*/site-packages' -prune -o -name __pycache__ -prune \
  -o -type f -print | LC_ALL=C sort | head -n 4000) >"$WORK/tree.list"
tar -cf "$WORK/tree.tar" -C "$(dirname "$TREE")" -T "$WORK/tree.list"
cpu_ms() { # pid: user + system time of all its threads, in ms
  awk '{ t += $14 + $15 } END { print t * 10 }' /proc/"$1"/task/*/stat
}
now() { date +%s.%N; }

targets=(polling not-polling bindfs)
for round in $(seq "$ROUNDS"); do
  for k in 0 1 2; do
    target=${targets[$(((round + k) % 3))]}
    dir=$WORK/fs/$target/mnt/Documents/r$round
    c0=$(cpu_ms "${PID[$target]}")
    meta=$("${PIN[@]}" python3 bench/metaops.py "$dir" "$FILES")
    c1=$(cpu_ms "${PID[$target]}")
    mkdir -p "$dir"
    t0=$(now)
    "${PIN[@]}" tar -xf "$WORK/tree.tar" -C "$dir"
    t1=$(now)
    c2=$(cpu_ms "${PID[$target]}")
    "${PIN[@]}" rm -rf "$dir"
    t2=$(now)
    c3=$(cpu_ms "${PID[$target]}")
    echo "$target $meta untar=$(echo "$t1 - $t0" | bc) rm=$(echo "$t2 - $t1" | bc)" \
      "metacpu=$((c1 - c0)) untarcpu=$((c2 - c1)) rmcpu=$((c3 - c2))"
  done
done >"$WORK/rounds"

python3 - "$WORK/rounds" "$ROUNDS" "$FILES" "$ONE_CPU" <<'EOF'
import collections, statistics, sys
path, rounds, files, one_cpu = sys.argv[1:]
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(path):
    target, *fields = line.split()
    for field in fields:
        key, value = field.split("=")
        runs[target][key].append(float(value))
median = lambda target, key: statistics.median(runs[target][key])
print(f"busy polling: {rounds} alternating rounds, {files} files, tmpfs backing"
      + (", everything on CPU 0" if one_cpu == "1" else ""))
print(f"{'workload':<12} {'bindfs':>10} {'not polling':>12} {'polling':>10} {'not/bindfs':>11} {'polling/bindfs':>15}")
for key, unit, higher in [("create", "ops/s", True), ("stat", "ops/s", True), ("unlink", "ops/s", True),
                          ("untar", "s", False), ("rm", "s", False)]:
    b, n, p = (median(t, key) for t in ("bindfs", "not-polling", "polling"))
    ratio = (lambda x: x / b) if higher else (lambda x: b / x)
    fmt = (lambda x: f"{x:,.0f}") if higher else (lambda x: f"{x:.3f}")
    print(f"{key + ' (' + unit + ')':<12} {fmt(b):>10} {fmt(n):>12} {fmt(p):>10} {ratio(n):>10.2f}x {ratio(p):>14.2f}x")
print("daemon CPU time (ms, medians): bindfs / AppBox not polling / AppBox polling (polling vs not)")
for key, label in [("metacpu", "create/stat/unlink"), ("untarcpu", "untar"), ("rmcpu", "rm -rf")]:
    b, n, p = (median(t, key) for t in ("bindfs", "not-polling", "polling"))
    change = f"{(p / n - 1) * 100:+.0f}%" if n else "-"
    print(f"  {label:<20} {b:>6.0f} / {n:>6.0f} / {p:>6.0f}  ({change})")
EOF
