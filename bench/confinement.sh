#!/usr/bin/env bash
# The cost of a device's app confinement (issue 28) on the metadata rows of bench.sh
# (bench/metaops.py: create, stat and unlink FILES empty files, one process), on one device
# mount over a fresh ext4 image, three ways in alternating order per run: the program
# outside any run with no run registered (nothing is looked up: the baseline); the same
# while another app's run is registered (each request's thread is looked up); and the
# program confined, started by appbox run --app (looked up, and checked against its
# containers). Prints the medians (operations per second, and the daemon's CPU time for
# the three phases, which a loaded machine disturbs less than throughput) and each one's
# ratio to the baseline (target: the confined program within 3%). Not a test:
# figures only. Needs root (mkfs, losetup, mount; confinement needs root), /dev/fuse,
# python3.
#
#   bench/confinement.sh [--files N] [--runs N] [--dir DIR] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
files=20000
runs=5
dir=/var/tmp
binary=.build/release/appbox
. bench/options.sh
bench_options files runs dir binary -- "$@"
whole files runs
need_root "mkfs, losetup, mount, control groups"
appbox_release
binary=$(realpath "$binary")
metaops=$(realpath bench/metaops.py)

. bench/fresh-ext4.sh
scratch "$dir" appbox-confinement
export XDG_RUNTIME_DIR=$SCRATCH/run
mkdir -p "$XDG_RUNTIME_DIR"
fs=$SCRATCH/fs
fresh_ext4 4G "$fs"
mnt=$SCRATCH/mnt
mkdir -p "$mnt" "$fs/device"
SCRATCH_MOUNTS+=("$mnt")
"$binary" mount --device --backing "$fs/device" --capacity 3G "$mnt"
"$binary" app install "$mnt" com.bench.app --group group.com.bench.shared >/dev/null
"$binary" app install "$mnt" com.bench.other >/dev/null
home=$mnt/Containers/Data/Application/com.bench.app
mount_id=$("$binary" status "$mnt" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["eventLog"]["id"])')
idler=
stop_idler() { if [ -n "$idler" ]; then kill "$idler" 2>/dev/null || true; wait "$idler" 2>/dev/null || true; idler=; fi; }
trap 'stop_idler; scratch_remove' EXIT

daemon=$(cat "$XDG_RUNTIME_DIR"/appbox/*.pid)
# The daemon's CPU time so far, in clock ticks (user + system).
daemon_ticks() { awk '{ print $14 + $15 }' "/proc/$daemon/stat"; }

# measure WAY RUN: one metaops line and the daemon's CPU ticks meanwhile, as "WAY create
# stat unlink ticks".
measure() {
  local out before
  before=$(daemon_ticks)
  case "$1" in
    baseline) out=$(python3 "$metaops" "$home/Documents/m$2" "$files") ;;
    other-run)
      # Another app's program keeps a run registered while this one runs outside any.
      "$binary" run "$mnt" --app com.bench.other -- sleep 600 &
      idler=$!
      until cat /proc/[0-9]*/cgroup 2>/dev/null | grep -q "^0::/appbox/$mount_id/run-"; do sleep 0.05; done
      out=$(python3 "$metaops" "$home/Documents/m$2" "$files")
      stop_idler
      ;;
    confined) out=$("$binary" run "$mnt" --app com.bench.app -- python3 "$metaops" "$home/Documents/m$2" "$files") ;;
  esac
  echo "$1 $(echo "$out" | sed 's/[a-z]*=//g') $(($(daemon_ticks) - before))"
}

results=$SCRATCH/results
ways=(baseline other-run confined)
for ((run = 1; run <= runs; run++)); do
  for ((i = 0; i < ${#ways[@]}; i++)); do
    way=${ways[$(((i + run) % ${#ways[@]}))]}
    measure "$way" "$run-$i" >>"$results"
  done
done
[ -n "${CONFINEMENT_RAW:-}" ] && cat "$results" >&2
python3 - "$results" "$files" "$runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    way, *values = line.split()
    rows.setdefault(way, []).append([float(v) for v in values])
print(f"app confinement: metaops.py, {sys.argv[2]} files, {sys.argv[3]} runs, medians (ops/s) and ratio to the baseline")
base = [statistics.median(r[i] for r in rows["baseline"]) for i in range(4)]
print(f"{'':22}{'create':>10}{'ratio':>7}{'stat':>10}{'ratio':>7}{'unlink':>10}{'ratio':>7}{'daemon CPU':>12}{'ratio':>7}")
for way, label in [("baseline", "no run"), ("other-run", "another app's run"), ("confined", "confined program")]:
    med = [statistics.median(r[i] for r in rows[way]) for i in range(4)]
    cells = "".join(f"{m:>10.0f}{m / b:>7.3f}" for m, b in zip(med[:3], base[:3]))
    print(f"{label:22}{cells}{med[3] / 100:>11.2f}s{med[3] / base[3]:>7.3f}")
print("(ops/s: higher is better; daemon CPU: the daemon's user+system time for the three phases, lower is better)")
PY
