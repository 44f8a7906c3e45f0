#!/usr/bin/env bash
# The daemon's two ways of changing a file's mode and times (bench/setattr-paths.py), on a
# freshly made ext4 image (bench/fresh-ext4.sh) in DIR.
#
# Usage: sudo bench/setattr-paths.sh [--dir DIR] [--files N] [--rounds R]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=/var/tmp files=2000 rounds=9
. bench/options.sh
bench_options dir files rounds -- "$@"
whole files rounds
need_root "mkfs, losetup, mount"
binary=true  # fresh-ext4.sh unmounts SCRATCH_MOUNTS with it: there are none
. bench/fresh-ext4.sh
scratch "$dir" appbox-setattr-paths
fresh_ext4 1G "$SCRATCH/fs"
echo "ext4 on $FRESH_LOOP, $files files, $rounds rounds, load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/setattr-paths.py "$SCRATCH/fs" --files "$files" --rounds "$rounds"
