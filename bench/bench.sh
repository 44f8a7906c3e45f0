#!/usr/bin/env bash
# AppBox benchmark: the same workloads, in one run, on the same
# disk, against a native directory, bindfs (Debian's FUSE passthrough) and AppBox; with
# FUSE over io_uring on, also AppBox over io_uring and libfuse's passthrough_hp over
# io_uring (when PASSTHROUGH_HP names its binary: bench/README.md says how to build it);
# and AppBox with the kernel's write cache (--write-cache, over io_uring when it is on).
#
# Usage: bench/bench.sh [--quick] [--runs N] [--dir DIR] [--in-place] [--only W[,W...]]
#                       [--targets T[,T...]] [--appbox PATH] [--enable-uring] [--keep]
#
#   --quick        small sizes, 1 run (a smoke run of about a minute)
#   --runs N       repetitions of each workload (default 3); the table shows medians
#   --dir DIR      where the test files live (default /var/tmp): by default each target
#                  gets its own freshly made ext4, an image file in DIR (so all on DIR's
#                  disk), loop-mounted with direct I/O, so that no target runs on a
#                  filesystem aged by another one's deletions
#   --in-place     put the three targets' directories on DIR's filesystem itself
#   --only LIST    workloads: seqwrite seqread randread randwrite appends meta untar
#                  gitstatus rm requests (appends = 300,000 writes of 4 bytes to one
#                  O_APPEND file; meta = create, stat, unlink; gitstatus and rm need the
#                  untarred tree, which is then made untimed; requests counts the FUSE
#                  requests per file of a create, an untar and its rm -rf, untimed)
#   --targets LIST native,bindfs,appbox,appbox-uring,appbox-wc,passthrough_hp (default:
#                  the first three and appbox-wc, appbox-uring when FUSE over io_uring is
#                  on, passthrough_hp when PASSTHROUGH_HP is set)
#   --appbox PATH  the AppBox binary (default .build/release/appbox, built if missing)
#   --enable-uring turn FUSE over io_uring on for the host first (writes 1 to
#                  /sys/module/fuse/parameters/enable_uring; it stays on)
#   --keep         keep the test directories afterwards
#
# PASSTHROUGH_HP=PATH: libfuse's example/passthrough_hp (3.18+, built with io_uring), run as
# `passthrough_hp -o io_uring --foreground SRC MNT` (its other options default).
#
# Needs root (drop_caches), /dev/fuse, fio, bindfs, fusermount3, python3, git, tar; perf
# for the requests of bindfs and passthrough_hp (the kernel's fuse:fuse_request_send
# tracepoint; AppBox counts its own).
# Writes bench/results/latest.md (the table), bench/results/latest.csv and a timestamped
# copy of the raw per-run CSV. Every mount and process it starts is stopped on exit,
# error or Ctrl-C (by PID, never by name).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

RUNS=3
DIR=/var/tmp
QUICK=0
IN_PLACE=0
ONLY=""
TARGETS=""
APPBOX="$REPO/.build/release/appbox"
KEEP=0
ENABLE_URING=0
URING_SWITCH=/sys/module/fuse/parameters/enable_uring

die() { echo "bench: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --runs) RUNS=${2:?--runs needs a number} RUNS_SET=1; shift ;;
    --dir) DIR=${2:?--dir needs a directory}; shift ;;
    --in-place) IN_PLACE=1 ;;
    --only) ONLY=${2:?--only needs a workload list}; shift ;;
    --targets) TARGETS=${2:?--targets needs a list}; shift ;;
    --appbox) APPBOX=${2:?--appbox needs a path}; shift ;;
    --enable-uring) ENABLE_URING=1 ;;
    --keep) KEEP=1 ;;
    -h | --help) usage ;;
    *) echo "bench: unknown option $1" >&2; usage ;;
  esac
  shift
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, not '$RUNS'"

if ((QUICK)); then
  [[ -n ${RUNS_SET:-} ]] || RUNS=1
  SEQ_MB=128 RAND_SIZE=32M RAND_SECONDS=2 META_FILES=1000 FS_SIZE=1G TREE_FILES=600 APPENDS=30000
else
  SEQ_MB=1024 RAND_SIZE=256M RAND_SECONDS=10 META_FILES=10000 FS_SIZE=4G TREE_FILES=0 APPENDS=300000 # 0 = all
fi

ALL_WORKLOADS="seqwrite seqread randread randwrite appends meta untar gitstatus rm requests"
selected() { [[ -z $ONLY || ",$ONLY," == *",$1,"* ]]; }
for w in ${ONLY//,/ }; do [[ " $ALL_WORKLOADS " == *" $w "* ]] || die "unknown workload '$w' (known: $ALL_WORKLOADS)"; done
if ((ENABLE_URING)); then
  [[ $(id -u) == 0 ]] || die "--enable-uring needs root"
  [[ -w $URING_SWITCH ]] || die "--enable-uring: $URING_SWITCH is missing (a kernel without FUSE over io_uring)"
  echo 1 >"$URING_SWITCH"
fi
uring_on() { [[ $(cat "$URING_SWITCH" 2>/dev/null) == [Y1] ]]; }
if [[ -z $TARGETS ]]; then
  TARGETS="native,bindfs,appbox,appbox-wc"
  if uring_on; then
    TARGETS+=",appbox-uring"
    [[ -n ${PASSTHROUGH_HP:-} ]] && TARGETS+=",passthrough_hp"
  fi
fi
for t in ${TARGETS//,/ }; do
  case $t in
    native | bindfs | appbox | appbox-wc) ;;
    appbox-uring | passthrough_hp) uring_on || die "target $t needs FUSE over io_uring: $URING_SWITCH is off (--enable-uring)" ;;
    *) die "unknown target '$t'" ;;
  esac
done
IFS=, read -r -a TARGET_LIST <<<"$TARGETS"
has_target() { [[ ",$TARGETS," == *",$1,"* ]]; }

# MARK: - Prerequisites

[[ $(id -u) == 0 ]] || die "run as root: cold-cache workloads write /proc/sys/vm/drop_caches"
[[ -c /dev/fuse ]] || die "/dev/fuse is missing (load the fuse module; in a container pass --device /dev/fuse)"
for tool in fio python3 git tar dd findmnt; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install fio git tar coreutils util-linux python3)"
done
if ((!IN_PLACE)); then
  for tool in mkfs.ext4 losetup; do
    command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install e2fsprogs mount), or use --in-place"
  done
fi
if has_target bindfs; then
  command -v bindfs >/dev/null || die "bindfs is not installed (apt-get install bindfs)"
fi
if has_target passthrough_hp; then
  [[ -x ${PASSTHROUGH_HP:-} ]] || die "target passthrough_hp needs PASSTHROUGH_HP=PATH to libfuse's example/passthrough_hp"
fi
if selected requests && { has_target bindfs || has_target passthrough_hp; }; then
  command -v perf >/dev/null || die "perf is not installed (apt-get install linux-perf): it counts bindfs's and passthrough_hp's requests"
fi
FUSERMOUNT=$(command -v fusermount3 || true)
[[ -n $FUSERMOUNT ]] || die "fusermount3 is not installed (apt-get install fuse3)"
[[ -d $DIR && -w $DIR ]] || die "--dir $DIR is not a writable directory"
[[ $BASH_VERSINFO -ge 5 ]] || die "needs bash 5 (EPOCHREALTIME)"

if { has_target appbox || has_target appbox-uring || has_target appbox-wc; } && [[ ! -x $APPBOX ]]; then
  [[ $APPBOX == "$REPO/.build/release/appbox" ]] || die "no AppBox binary at $APPBOX"
  command -v swift >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
  command -v swift >/dev/null || die "no AppBox binary and no swift toolchain to build it"
  log "building AppBox (release)"
  (cd "$REPO" && swift build -c release) >&2 || die "swift build -c release failed"
fi

# MARK: - Layout and cleanup

BASE=$(mktemp -d "$DIR/appbox-bench.XXXXXX")
declare -A WORK BACKING ROOT MNT
BINDFS_MNT=$BASE/bindfs-mnt APPBOX_MNT=$BASE/appbox-mnt APPBOX_URING_MNT=$BASE/appbox-uring-mnt HP_MNT=$BASE/hp-mnt
APPBOX_WC_MNT=$BASE/appbox-wc-mnt
BINDFS_PID="" APPBOX_PID="" APPBOX_URING_PID="" APPBOX_WC_PID="" HP_PID=""
FS_MOUNTS=() LOOP_DEVICES=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  cd /
  if [[ -n $BINDFS_PID ]]; then
    mountpoint -q "$BINDFS_MNT" && { "$FUSERMOUNT" -u "$BINDFS_MNT" 2>/dev/null || "$FUSERMOUNT" -u -z "$BINDFS_MNT" || true; }
    stop_pid "$BINDFS_PID"
  fi
  if [[ -n $HP_PID ]]; then
    mountpoint -q "$HP_MNT" && { "$FUSERMOUNT" -u "$HP_MNT" 2>/dev/null || "$FUSERMOUNT" -u -z "$HP_MNT" || true; }
    stop_pid "$HP_PID"
  fi
  local mnt pid
  for mnt in "$APPBOX_MNT" "$APPBOX_URING_MNT" "$APPBOX_WC_MNT"; do
    case $mnt in
      "$APPBOX_MNT") pid=$APPBOX_PID ;;
      "$APPBOX_URING_MNT") pid=$APPBOX_URING_PID ;;
      *) pid=$APPBOX_WC_PID ;;
    esac
    if [[ -n $pid ]] || mountpoint -q "$mnt" 2>/dev/null; then
      if mountpoint -q "$mnt"; then
        "$APPBOX" unmount "$mnt" 2>/dev/null || "$FUSERMOUNT" -u "$mnt" 2>/dev/null || "$FUSERMOUNT" -u -z "$mnt" || true
      fi
      [[ -n $pid ]] && stop_pid "$pid"
    fi
  done
  local m d
  for m in "${FS_MOUNTS[@]}"; do umount "$m" || log "could not unmount $m"; done
  for d in "${LOOP_DEVICES[@]}"; do losetup -d "$d" || log "could not detach $d"; done
  if ((KEEP)); then log "kept $BASE"; else rm -rf --one-file-system "$BASE"; fi
  exit "$status"
}
# Whether a process runs: a zombie has exited (init may reap a daemon only seconds later).
running() { kill -0 "$1" 2>/dev/null && [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) != Z ]]; }
# Waits up to 10 s for a process we started to end after its unmount, then signals it.
stop_pid() {
  local pid=$1 i
  for ((i = 0; i < 100; i++)); do running "$pid" || return 0; sleep 0.1; done
  log "process $pid still running after unmount: sending SIGTERM"
  kill -TERM "$pid" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_for_mount() { # path pid
  local i
  for ((i = 0; i < 100; i++)); do
    [[ $(findmnt -no FSTYPE --mountpoint "$1" 2>/dev/null) == fuse* ]] && return 0
    [[ -z ${2:-} ]] || running "$2" || die "the daemon for $1 exited before mounting"
    sleep 0.1
  done
  die "$1 was not mounted within 10 s"
}

# The AppBox daemon's pid file: RuntimeDirectory.files(for:) (FNV-1a of the mountpoint).
appbox_pid() {
  python3 - "$1" <<'EOF'
import os, sys
path = os.path.realpath(sys.argv[1])
h = 0xcbf29ce484222325
for b in path.encode():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
xdg = os.environ.get("XDG_RUNTIME_DIR", "")
runtime = xdg + "/appbox" if xdg.startswith("/") else ("/run/appbox" if os.geteuid() == 0 else f"/tmp/appbox-{os.geteuid()}")
try:
    print(open(f"{runtime}/{h:x}.pid").read().strip())
except OSError:
    pass
EOF
}

# Each target's own filesystem: a fresh ext4 in an image file under DIR, so on the same
# disk. The loop device uses direct I/O: no second copy of the data in the page cache.
for t in "${TARGET_LIST[@]}"; do
  if ((IN_PLACE)); then ROOT[$t]=$BASE; continue; fi
  truncate -s "$FS_SIZE" "$BASE/$t.img"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$BASE/$t.img" || die "mkfs.ext4 failed"
  dev=$(losetup --find --show --direct-io=on "$BASE/$t.img") || die "losetup failed"
  LOOP_DEVICES+=("$dev")
  mkdir "$BASE/$t.fs"
  mount "$dev" "$BASE/$t.fs" || die "could not mount $dev"
  FS_MOUNTS+=("$BASE/$t.fs")
  ROOT[$t]=$BASE/$t.fs
done
NATIVE_DIR=${ROOT[native]:-}/native
BINDFS_SRC=${ROOT[bindfs]:-}/bindfs-src
APPBOX_BACKING=${ROOT[appbox]:-}/appbox-backing

if has_target native; then
  mkdir -p "$NATIVE_DIR/Documents"
  WORK[native]=$NATIVE_DIR/Documents BACKING[native]=$NATIVE_DIR/Documents
fi
if has_target bindfs; then
  mkdir -p "$BINDFS_SRC/Documents" "$BINDFS_MNT"
  bindfs -f "$BINDFS_SRC" "$BINDFS_MNT" &
  BINDFS_PID=$!
  wait_for_mount "$BINDFS_MNT" "$BINDFS_PID"
  WORK[bindfs]=$BINDFS_MNT/Documents BACKING[bindfs]=$BINDFS_SRC/Documents
fi
mount_appbox() { # target mountpoint backing transport [option...]
  mkdir -p "$3" "$2"
  "$APPBOX" mount --unlocked --transport "$4" "${@:5}" --backing "$3" "$2" || die "appbox mount ($4 ${*:5}) failed"
  wait_for_mount "$2"
  local in_use
  in_use=$("$APPBOX" status --json "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["transport"]["inUse"])')
  [[ $in_use == "$4" ]] || die "$1 asked for $4 and runs on $in_use (see appbox status $2)"
  [[ -d $2/Documents ]] || die "no Documents directory in the AppBox mount $2"
  WORK[$1]=$2/Documents BACKING[$1]=$3/Documents MNT[$1]=$2
}
if has_target appbox; then
  mount_appbox appbox "$APPBOX_MNT" "$APPBOX_BACKING" dev-fuse
  APPBOX_PID=$(appbox_pid "$APPBOX_MNT")
  [[ -n $APPBOX_PID ]] || log "warning: could not find the AppBox daemon's pid file"
fi
if has_target appbox-uring; then
  mount_appbox appbox-uring "$APPBOX_URING_MNT" "${ROOT[appbox-uring]}/appbox-backing" io-uring
  APPBOX_URING_PID=$(appbox_pid "$APPBOX_URING_MNT")
fi
if has_target appbox-wc; then
  mount_appbox appbox-wc "$APPBOX_WC_MNT" "${ROOT[appbox-wc]}/appbox-backing" "$(uring_on && echo io-uring || echo dev-fuse)" \
    --write-cache
  APPBOX_WC_PID=$(appbox_pid "$APPBOX_WC_MNT")
fi
if has_target passthrough_hp; then
  mkdir -p "${ROOT[passthrough_hp]}/hp-src/Documents" "$HP_MNT"
  "$PASSTHROUGH_HP" -o io_uring --foreground "${ROOT[passthrough_hp]}/hp-src" "$HP_MNT" >"$BASE/passthrough_hp.log" 2>&1 &
  HP_PID=$!
  wait_for_mount "$HP_MNT" "$HP_PID"
  # libfuse names its ring threads fuse-ring-N: without them it fell back to /dev/fuse.
  grep -qs '^fuse-ring-' /proc/"$HP_PID"/task/*/comm || die "passthrough_hp does not run over io_uring (see $BASE/passthrough_hp.log)"
  WORK[passthrough_hp]=$HP_MNT/Documents BACKING[passthrough_hp]=${ROOT[passthrough_hp]}/hp-src/Documents MNT[passthrough_hp]=$HP_MNT
fi
[[ -n ${WORK[bindfs]:-} ]] && MNT[bindfs]=$BINDFS_MNT
# In place, the targets share DIR's filesystem. This VM's (ext4 without a journal) will not
# reuse an inode freed in the last minute and scans past every such inode on each create,
# so a target that creates right after another one deleted in the same block group pays
# for the other's deletions. The "top of hierarchy" flag makes ext4 place each new
# directory below these in a block group of its own (Orlov), away from earlier deletions.
if ((IN_PLACE)); then
  for t in "${TARGET_LIST[@]}"; do chattr +T "${BACKING[$t]}" 2>/dev/null || log "note: chattr +T failed on ${BACKING[$t]} (not ext4?)"; done
fi
log "directories under $BASE ($( ((IN_PLACE)) && echo "in place on $(findmnt -no FSTYPE -T "$BASE")" || echo "a fresh $FS_SIZE ext4 for each target")); bindfs pid ${BINDFS_PID:--}, appbox pid ${APPBOX_PID:--}, appbox-uring pid ${APPBOX_URING_PID:--}, appbox-wc pid ${APPBOX_WC_PID:--}, passthrough_hp pid ${HP_PID:--}"

# MARK: - Measuring

RESULTS=$REPO/bench/results
mkdir -p "$RESULTS"
STAMP=$(date +%Y%m%d-%H%M%S)
CSV=$RESULTS/runs-$STAMP.csv
echo "workload,unit,better,target,run,value" >"$CSV"

record() { # workload unit better target run value
  echo "$1,$2,$3,$4,$5,$6" >>"$CSV"
  log "$1 [$4] run $5: $6 $2"
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", n / s }'; }
fio_iops() { # fio json on stdin, "read" or "write"
  python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["jobs"][0][sys.argv[1]]["iops"])' "$1"
}

SEQ_BYTES=$((SEQ_MB * 1048576))

bench_seqwrite() { # target run
  local f=${WORK[$1]}/seq.dat t0 t1
  rm -f "$f"; drop_caches
  t0=$(now)
  dd if=/dev/zero of="$f" bs=1M count="$SEQ_MB" conv=fsync status=none
  t1=$(now)
  record seqwrite MiB/s higher "$1" "$2" "$(rate "$SEQ_MB" "$(elapsed "$t0" "$t1")")"
}

bench_seqread() {
  local f=${WORK[$1]}/seq.dat t0 t1
  if [[ $(stat -c %s "$f" 2>/dev/null || echo 0) != "$SEQ_BYTES" ]]; then
    dd if=/dev/zero of="$f" bs=1M count="$SEQ_MB" conv=fsync status=none
  fi
  drop_caches
  t0=$(now)
  dd if="$f" of=/dev/null bs=1M status=none
  t1=$(now)
  record seqread MiB/s higher "$1" "$2" "$(rate "$SEQ_MB" "$(elapsed "$t0" "$t1")")"
}

# Random I/O: the kernel's cache of the mount is cold, the backing file's pages are warm
# (drop caches, then read the backing file directly), so the numbers compare the
# passthrough layers and not the disk.
rand_prepare() {
  local f=${WORK[$1]}/rand.dat
  [[ -f $f ]] || fio --name=layout --filename="$f" --size="$RAND_SIZE" --rw=write --bs=1M \
    --ioengine=psync --end_fsync=1 --output=/dev/null
  drop_caches
  cat "${BACKING[$1]}/rand.dat" >/dev/null
}

bench_randread() {
  rand_prepare "$1"
  local out
  out=$(fio --name=randread --filename="${WORK[$1]}/rand.dat" --size="$RAND_SIZE" --rw=randread --bs=4k \
    --ioengine=psync --direct=0 --invalidate=0 --numjobs=1 --time_based --runtime="$RAND_SECONDS" --output-format=json)
  record randread IOPS higher "$1" "$2" "$(fio_iops read <<<"$out")"
}

bench_randwrite() {
  rand_prepare "$1"
  local out
  out=$(fio --name=randwrite --filename="${WORK[$1]}/rand.dat" --size="$RAND_SIZE" --rw=randwrite --bs=4k \
    --ioengine=psync --direct=0 --invalidate=0 --numjobs=1 --time_based --runtime="$RAND_SECONDS" --end_fsync=1 \
    --output-format=json)
  record randwrite IOPS higher "$1" "$2" "$(fio_iops write <<<"$out")"
}

# Small appends, as a log or a journal makes them: one O_APPEND file, APPENDS writes of 4
# bytes, closed (what a write cache holds is written back by the close, timed with it).
bench_appends() {
  local out
  out=$(python3 - "${WORK[$1]}/appends.log" "$APPENDS" <<'PY'
import os, sys, time
path, count = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
start = time.perf_counter()
for _ in range(count):
    os.write(fd, b"abc\n")
os.close(fd)
print(f"{count / (time.perf_counter() - start):.1f}")
PY
)
  rm -f "${WORK[$1]}/appends.log"
  record appends writes/s higher "$1" "$2" "$out"
}

bench_meta() {
  local out
  drop_caches
  out=$(python3 "$HERE/metaops.py" "${WORK[$1]}/meta" "$META_FILES")
  local create=${out#*create=} stat=${out#*stat=} unlink=${out#*unlink=}
  record create ops/s higher "$1" "$2" "${create%% *}"
  record stat ops/s higher "$1" "$2" "${stat%% *}"
  record unlink ops/s higher "$1" "$2" "${unlink%% *}"
  settle_inodes
}

# In place, on an ext4 without a journal, an inode freed in the last few seconds is not
# reused, and finding a free one past thousands of fresh deletions is slow: without a
# pause, each target's creates would pay for the previous target's unlinks. Untimed.
settle_inodes() { sync; if ((IN_PLACE)); then sleep 6; fi; }

# The tree: python's standard library and Debian's python packages (a few thousand real
# files, tens of MB), tarred once per run of this script.
TARBALL=$BASE/tree.tar
make_tarball() {
  [[ -f $TARBALL ]] && return
  local sources=() d
  for d in /usr/lib/python3.[0-9]* /usr/lib/python3/dist-packages; do [[ -d $d ]] && sources+=("${d#/}"); done
  if ((${#sources[@]} == 0)); then
    d=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
    sources=("${d#/}")
  fi
  (cd / && find "${sources[@]}" -type f | LC_ALL=C sort | awk -v n="$TREE_FILES" 'n == 0 || NR <= n') \
    >"$BASE/tree.list"
  tar cf "$TARBALL" -C / -T "$BASE/tree.list"
  log "tree: $(wc -l <"$BASE/tree.list") files, $(du -h "$TARBALL" | cut -f1) tar from ${sources[*]}"
}

GIT=(git -c user.name=bench -c user.email=bench@localhost -c safe.directory='*' -c init.defaultBranch=main)

bench_tree() { # target run: untar (+sync), git status, rm -rf; records what --only selects
  local tree=${WORK[$1]}/tree t0 t1
  rm -rf "$tree"; mkdir -p "$tree"; drop_caches
  t0=$(now)
  tar xf "$TARBALL" -C "$tree"
  sync
  t1=$(now)
  if selected untar; then record untar s lower "$1" "$2" "$(elapsed "$t0" "$t1")"; fi
  if selected gitstatus; then
    (cd "$tree" && "${GIT[@]}" init -q && "${GIT[@]}" add -A && "${GIT[@]}" commit -q -m tree) >/dev/null
    (cd "$tree" && "${GIT[@]}" status --porcelain >/dev/null) # warm
    t0=$(now)
    (cd "$tree" && "${GIT[@]}" status >/dev/null)
    t1=$(now)
    record gitstatus s lower "$1" "$2" "$(elapsed "$t0" "$t1")"
  fi
  t0=$(now)
  rm -rf "$tree"
  t1=$(now)
  if selected rm; then record rm s lower "$1" "$2" "$(elapsed "$t0" "$t1")"; fi
  settle_inodes
}

# Requests per file: the FUSE requests the kernel sent for a create of META_FILES empty
# files, an untar of the tree and its rm -rf, counted by the kernel's
# fuse:fuse_request_send tracepoint for every FUSE target alike (forgets are not requests
# there). AppBox also counts its own by operation (appbox status --json, forgets
# included): requests-STAMP.csv has them. Untimed, once per run.
REQ_CSV=$RESULTS/requests-$STAMP.csv
echo "target,phase,files,operation,count" >"$REQ_CSV"
connection() { awk -v m="$1" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo; }
count_requests() { # target run phase files command...
  local t=$1 run=$2 phase=$3 files=$4 minor before="" out
  shift 4
  minor=$(connection "${MNT[$t]}")
  [[ -n $minor ]] || die "no mount at ${MNT[$t]}"
  if [[ $t == appbox* ]]; then before=$("$APPBOX" status --json "${MNT[$t]}"); fi
  out=$(perf stat -x, -a -e fuse:fuse_request_send --filter "connection == $minor" -- "$@" 2>&1 >/dev/null | tail -1)
  record "req-$phase" req/file lower "$t" "$run" "$(awk -v n="${out%%,*}" -v f="$files" 'BEGIN { printf "%.2f", n / f }')"
  if [[ -n $before ]]; then
    python3 - "$t" "$phase" "$files" "$before" "$("$APPBOX" status --json "${MNT[$t]}")" >>"$REQ_CSV" <<'PY'
import json, sys
t, phase, files, before, after = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
for op, n in after["requests"].items():
    d = n - before["requests"].get(op, 0)
    if d:
        print(f"{t},{phase},{files},{op},{d}")
PY
  fi
}
bench_requests() { # target run
  [[ -n ${MNT[$1]:-} ]] || return 0 # native: no requests
  local dir=${WORK[$1]}/requests files
  mkdir -p "$dir"
  count_requests "$1" "$2" create "$META_FILES" python3 -c 'import os, sys
for i in range(int(sys.argv[2])): os.close(os.open(f"{sys.argv[1]}/f{i:06d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))' "$dir" "$META_FILES"
  rm -rf "$dir"
  mkdir -p "$dir"
  files=$(wc -l <"$BASE/tree.list")
  count_requests "$1" "$2" untar "$files" sh -c 'tar xf "$1" -C "$2" && sync' - "$TARBALL" "$dir"
  count_requests "$1" "$2" rm "$files" rm -rf "$dir"
  settle_inodes
}

# Runs are interleaved across targets (run 1 on each, then run 2…) and the order rotates
# from run to run, so that drift of the machine, and what the target before left behind
# (dirty pages, freed inodes), hit all three alike.
each() { # function
  local run i n=${#TARGET_LIST[@]}
  for ((run = 1; run <= RUNS; run++)); do
    for ((i = 0; i < n; i++)); do "$1" "${TARGET_LIST[(i + run - 1) % n]}" "$run"; done
  done
}

START=$(now)
selected seqwrite && each bench_seqwrite
selected seqread && each bench_seqread
for t in "${TARGET_LIST[@]}"; do rm -f "${WORK[$t]}/seq.dat"; done
selected randread && each bench_randread
selected randwrite && each bench_randwrite
for t in "${TARGET_LIST[@]}"; do rm -f "${WORK[$t]}/rand.dat"; done
selected appends && each bench_appends
selected meta && each bench_meta
if selected untar || selected gitstatus || selected rm; then
  make_tarball
  each bench_tree
fi
if selected requests; then
  make_tarball
  each bench_requests
fi

# MARK: - Report

APPBOX_REV=$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
cp "$CSV" "$RESULTS/latest.csv"
python3 "$HERE/report.py" "$CSV" "$RESULTS/latest.md" \
  "date: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -sr), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)" \
  "disk: $(findmnt -no FSTYPE,SOURCE -T "$BASE") under $DIR, $( ((IN_PLACE)) && echo "targets in place" || echo "each target on a fresh $FS_SIZE ext4 image (loop, direct I/O)"); runs: $RUNS (medians); mode: $( ((QUICK)) && echo quick || echo full)" \
  "sizes: sequential $SEQ_MB MiB (dd bs=1M, conv=fsync); random fio psync 4k on $RAND_SIZE for ${RAND_SECONDS}s (mount cache cold, backing cache warm); $META_FILES files; tree $(if [[ -f $BASE/tree.list ]]; then echo "$(wc -l <"$BASE/tree.list") files"; else echo -; fi)" \
  "bindfs: $(bindfs --version 2>/dev/null | head -1 || echo -) with default options; AppBox: $APPBOX at $APPBOX_REV (appbox: --transport dev-fuse, appbox-uring: --transport io-uring, appbox-wc: --write-cache over $(uring_on && echo io-uring || echo dev-fuse))" \
  "passthrough_hp: ${PASSTHROUGH_HP:--} (-o io_uring); requests per file: bench/results/$(basename "$REQ_CSV") has AppBox's by operation" \
  "raw runs: bench/results/$(basename "$CSV")"
log "done in $(elapsed "$START" "$(now)") s; table in $RESULTS/latest.md, raw runs in $CSV"
