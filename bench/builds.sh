#!/usr/bin/env bash
# Two (or more) AppBox builds side by side with the native directory, in one run: for a
# change inside the daemon that should cost nothing (a lock, a wait), the figures of
# each build and the run's own spread. Each target works on a fresh ext4 image of its
# own, on the same disk (as bench.sh); runs are interleaved and their order rotates.
# The workloads run in Library/Caches, where every open pins its file against purges,
# and under quota pressure:
#
#   meta       create, stat, unlink 10,000 empty files (bench/metaops.py)
#   tree       untar a tree of python's standard library + sync, then rm -rf it
#   fullwrite  2,000 new 4 KiB files in Documents of a full sandbox: each write purges
#              a Caches file first (native: the writes alone)
#   race       for 10 s, a reader opens and reads Caches files in the order a purge takes
#              them while a writer adds new ones, each purging the least recently used:
#              the reader keeps meeting the purge, and some opens find a victim between
#              its commit and its unlink and wait (AppBox only); reads/s, writes/s and
#              the daemon's CPU seconds
#
# Usage: sudo bench/builds.sh --appbox NAME=PATH [--appbox NAME=PATH ...] [--runs N]
#                             [--dir DIR] [--only W[,W...]] [--no-native]
# The first --appbox is the baseline the others are compared with (ratio of medians,
# above 1: faster than the baseline). Prints a Markdown table; the raw runs go to
# bench/results/builds-DATE.csv. Needs root (drop_caches, loop devices), /dev/fuse,
# python3, tar, mkfs.ext4. Every mount it makes is unmounted on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
RUNS=5 DIR=/var/tmp ONLY="" NATIVE=1
declare -a NAMES=() BINARIES=()
die() { echo "builds: $*" >&2; exit 1; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
while (($#)); do
  case $1 in
    --appbox)
      [[ ${2:-} == *=/* ]] || die "--appbox needs NAME=/absolute/path"
      NAMES+=("${2%%=*}") BINARIES+=("${2#*=}"); shift ;;
    --runs) RUNS=${2:?}; shift ;;
    --dir) DIR=${2:?}; shift ;;
    --only) ONLY=${2:?}; shift ;;
    --no-native) NATIVE=0 ;;
    *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 64 ;;
  esac
  shift
done
((${#NAMES[@]} >= 1)) || die "give at least one --appbox NAME=PATH"
for b in "${BINARIES[@]}"; do [[ -x $b ]] || die "no AppBox binary at $b"; done
[[ $(id -u) == 0 ]] || die "run as root"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"
selected() { [[ -z $ONLY || ",$ONLY," == *",$1,"* ]]; }

TARGETS=()
((NATIVE)) && TARGETS+=(native)
TARGETS+=("${NAMES[@]}")
declare -A BINARY
for i in "${!NAMES[@]}"; do BINARY[${NAMES[$i]}]=${BINARIES[$i]}; done

BASE=$(mktemp -d "$DIR/appbox-builds.XXXXXX")
export XDG_RUNTIME_DIR=$BASE/run
mkdir -p "$XDG_RUNTIME_DIR"
MOUNTS=() FS_MOUNTS=() LOOPS=()
cleanup() {
  local status=$? m
  trap - EXIT INT TERM
  cd /
  for m in "${MOUNTS[@]}"; do
    mountpoint -q "$m" 2>/dev/null && { "${BINARIES[0]}" unmount "$m" 2>/dev/null || fusermount3 -u "$m" || fusermount3 -uz "$m" || true; }
  done
  for m in "${FS_MOUNTS[@]}"; do umount "$m" || log "could not unmount $m"; done
  for m in "${LOOPS[@]}"; do losetup -d "$m" || log "could not detach $m"; done
  rm -rf --one-file-system "$BASE"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

declare -A ROOT
for t in "${TARGETS[@]}"; do
  truncate -s 4G "$BASE/$t.img"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$BASE/$t.img"
  dev=$(losetup --find --show --direct-io=on "$BASE/$t.img")
  LOOPS+=("$dev")
  mkdir "$BASE/$t.fs"
  mount "$dev" "$BASE/$t.fs"
  FS_MOUNTS+=("$BASE/$t.fs")
  ROOT[$t]=$BASE/$t.fs
done

TARBALL=$BASE/tree.tar
(cd / && find usr/lib/python3.11 -type f 2>/dev/null | LC_ALL=C sort | head -3000) >"$BASE/tree.list"
[[ -s $BASE/tree.list ]] || (cd / && find "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"][1:])')" -type f | LC_ALL=C sort | head -3000) >"$BASE/tree.list"
tar cf "$TARBALL" -C / -T "$BASE/tree.list"

CSV=$REPO/bench/results/builds-$(date +%Y%m%d-%H%M%S).csv
mkdir -p "$REPO/bench/results"
echo "workload,unit,better,target,run,value" >"$CSV"
record() { echo "$1,$2,$3,$4,$5,$6" >>"$CSV"; log "$1 [$4] run $5: $6 $2"; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }

# A fresh sandbox for one run of one workload: sets DIRECTORY (where the workload works:
# Library/Caches of a new mount, or a new native directory), MNT and PID (AppBox only).
MNT="" PID=""
setup() { # target run workload [capacity]
  local t=$1 backing=${ROOT[$1]}/$3-$2
  if [[ $t == native ]]; then
    mkdir -p "$backing/Library/Caches" "$backing/Documents"
    MNT=$backing PID="" DIRECTORY=$backing/Library/Caches
    return
  fi
  MNT=$BASE/mnt-$t-$3-$2
  mkdir -p "$backing" "$MNT"
  "${BINARY[$t]}" mount --unlocked --capacity "${4:-2G}" --backing "$backing" "$MNT" || die "mount failed"
  MOUNTS+=("$MNT")
  PID=$(python3 - "$MNT" <<'EOF'
import os, sys
path = os.path.realpath(sys.argv[1])
h = 0xcbf29ce484222325
for b in path.encode():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
print(open(f"{os.environ['XDG_RUNTIME_DIR']}/appbox/{h:x}.pid").read().strip())
EOF
)
  DIRECTORY=$MNT/Library/Caches
}
teardown() { # target
  [[ $1 == native ]] && return
  "${BINARY[$1]}" unmount "$MNT"
}

# N files of 4 KiB in directory D, names with prefix P (untimed preparation, or timed).
write_files() { # dir count prefix
  python3 - "$@" <<'EOF'
import os, sys
d, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(d, exist_ok=True)
block = b"y" * 4096
for i in range(n):
    fd = os.open(os.path.join(d, f"{prefix}{i:06d}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, block)
    os.close(fd)
EOF
}

# Shrinks the sandbox to what it uses now plus BYTES: the next allocations purge.
squeeze() { # bytes
  local used
  used=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["used"])' "$("${BINARY[$T]}" status --json "$MNT")")
  "${BINARY[$T]}" resize "$MNT" --capacity $((used + $1)) >/dev/null
}

bench_meta() { # target run
  T=$1; setup "$1" "$2" meta; drop_caches
  local out
  out=$(python3 "$HERE/metaops.py" "$DIRECTORY/meta" 10000)
  local create=${out#*create=} stat=${out#*stat=} unlink=${out#*unlink=}
  record create ops/s higher "$1" "$2" "${create%% *}"
  record stat ops/s higher "$1" "$2" "${stat%% *}"
  record unlink ops/s higher "$1" "$2" "${unlink%% *}"
  teardown "$1"
}

bench_tree() {
  T=$1; setup "$1" "$2" tree; drop_caches
  local t0 t1
  mkdir -p "$DIRECTORY/tree"
  t0=$(now); tar xf "$TARBALL" -C "$DIRECTORY/tree"; sync; t1=$(now)
  record untar s lower "$1" "$2" "$(elapsed "$t0" "$t1")"
  t0=$(now); rm -rf "$DIRECTORY/tree"; t1=$(now)
  record rm s lower "$1" "$2" "$(elapsed "$t0" "$t1")"
  teardown "$1"
}

bench_fullwrite() {
  T=$1; setup "$1" "$2" fullwrite
  write_files "$DIRECTORY/fill" 3000 c
  [[ $1 == native ]] || squeeze 65536
  drop_caches
  local t0 t1
  t0=$(now); write_files "$MNT/Documents/w" 2000 w; t1=$(now)
  record fullwrite files/s higher "$1" "$2" "$(awk -v s="$(elapsed "$t0" "$t1")" 'BEGIN { printf "%.1f", 2000 / s }')"
  teardown "$1"
}

bench_race() {
  [[ $1 == native ]] && return
  T=$1; setup "$1" "$2" race
  write_files "$DIRECTORY/r" 2000 r
  squeeze 65536
  local cpu0 out
  cpu0=$(cpu_seconds "$PID")
  out=$(python3 - "$DIRECTORY/r" <<'EOF'
import os, sys, threading, time
d = sys.argv[1]
names = sorted(os.listdir(d))
stop = time.monotonic() + 10
counts = {"reads": 0, "misses": 0, "writes": 0, "full": 0}
# The reader walks the files in the order they were made, the order a purge takes them
# (least recently used first: what it read is used again), so it keeps meeting the purge
# at the frontier: it takes back victims not yet committed to, and waits for the others.
def reader():
    i = 0
    while time.monotonic() < stop:
        name = names[i % len(names)]
        i += 1
        try:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            os.read(fd, 4096)
            os.close(fd)
            counts["reads"] += 1
        except FileNotFoundError:
            counts["misses"] += 1
def writer():
    block, i = b"z" * 4096, 0
    while time.monotonic() < stop:
        fd = os.open(os.path.join(d, f"n{i:07d}"), os.O_WRONLY | os.O_CREAT, 0o644)
        i += 1
        try:
            os.write(fd, block)
            counts["writes"] += 1
        except OSError:  # ENOSPC: four purge rounds in a row lost their victim to the reader
            counts["full"] += 1
        os.close(fd)
threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
start = time.monotonic()
for t in threads: t.start()
for t in threads: t.join()
s = time.monotonic() - start
print(f"reads={counts['reads'] / s:.1f} writes={counts['writes'] / s:.1f} misses={counts['misses']} full={counts['full']}")
EOF
)
  local reads=${out#*reads=} writes=${out#*writes=}
  record race-reads reads/s higher "$1" "$2" "${reads%% *}"
  record race-writes writes/s higher "$1" "$2" "${writes%% *}"
  record race-cpu "daemon CPU s" lower "$1" "$2" "$(awk -v a="$cpu0" -v b="$(cpu_seconds "$PID")" 'BEGIN { printf "%.3f", b - a }')"
  teardown "$1"
}

each() { # function
  local run i n=${#TARGETS[@]}
  for ((run = 1; run <= RUNS; run++)); do
    for ((i = 0; i < n; i++)); do "$1" "${TARGETS[(i + run - 1) % n]}" "$run"; done
  done
}
log "targets: ${TARGETS[*]}; $RUNS runs; under $BASE"
selected meta && each bench_meta
selected tree && each bench_tree
selected fullwrite && each bench_fullwrite
selected race && each bench_race

python3 - "$CSV" "${NAMES[0]}" "${TARGETS[@]}" <<'EOF'
import csv, statistics, sys
path, baseline, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
values, by_run, units, better = {}, {}, {}, {}
for row in csv.DictReader(open(path)):
    values.setdefault((row["workload"], row["target"]), []).append(float(row["value"]))
    by_run.setdefault((row["workload"], row["target"]), {})[row["run"]] = float(row["value"])
    units[row["workload"]], better[row["workload"]] = row["unit"], row["better"]
builds = [t for t in targets if t != "native"]
print("| workload | unit | " + " | ".join(f"{t} median (min–max)" for t in targets)
      + "".join(f" | {b} vs {baseline} (×), per run" for b in builds[1:]) + " |")
print("|---|---|" + "---:|" * (len(targets) + len(builds) - 1))
def fmt(v):
    return f"{v:,.0f}" if v >= 1000 else f"{v:.1f}" if v >= 10 else f"{v:.3f}"
for w in units:
    cells, med = [], {}
    for t in targets:
        vs = values.get((w, t))
        if not vs:
            cells.append("–")
            continue
        med[t] = statistics.median(vs)
        cells.append(f"{fmt(med[t])} ({fmt(min(vs))}–{fmt(max(vs))})")
    def ratio(new, old):
        return new / old if better[w] == "higher" else old / new
    ratios = []
    for b in builds[1:]:
        if b in med and baseline in med and med[b] and med[baseline]:
            # Within each run (the targets of one run are measured minutes apart at most).
            mine, theirs = by_run.get((w, b), {}), by_run.get((w, baseline), {})
            paired = sorted(ratio(mine[n], theirs[n]) for n in mine if n in theirs and mine[n] and theirs[n])
            ratios.append(f"{ratio(med[b], med[baseline]):.2f}, {paired[0]:.2f}–{paired[-1]:.2f}")
        else:
            ratios.append("–")
    arrow = " ↑" if better[w] == "higher" else " ↓"
    print(f"| {w} | {units[w]}{arrow} | " + " | ".join(cells) + "".join(f" | {r}" for r in ratios) + " |")
EOF
log "raw runs: $CSV"
