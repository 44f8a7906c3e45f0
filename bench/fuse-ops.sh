#!/usr/bin/env bash
# Counts the FUSE requests the kernel sends while a command runs, per mount and opcode
# (perf and the fuse:fuse_request_send tracepoint, kernel >= 6.x; needs root).
# Usage: bench/fuse-ops.sh COMMAND [ARG...]
set -euo pipefail
(($#)) || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 64; }
command -v perf >/dev/null || { echo "fuse-ops: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
data=$(mktemp /tmp/fuse-ops.XXXXXX)
trap 'rm -f "$data"' EXIT
perf record -q -o "$data" -e fuse:fuse_request_send -a -- "$@" >&2
# connection is the mount's device number: map it to the mountpoint.
perf script -i "$data" -F trace 2>/dev/null | python3 -c '
import collections, re, sys
mounts = {}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    major, minor = map(int, f[2].split(":"))
    mounts[(major << 20) | minor] = f[4]
counts = collections.Counter()
for line in sys.stdin:
    m = re.search(r"connection (\d+) req \d+ opcode \d+ \((\w+)\)", line)
    if m:
        counts[(mounts.get(int(m.group(1)), m.group(1)), m.group(2))] += 1
for mount in sorted({k[0] for k in counts}):
    total = sum(v for k, v in counts.items() if k[0] == mount)
    ops = ", ".join(f"{op[5:].lower()} {n}" for (m, op), n in counts.most_common() if m == mount)
    print(f"{mount}: {total} requests: {ops}")
'
