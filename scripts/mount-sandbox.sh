#!/usr/bin/env bash
# The main job on a fresh machine: install what AppBox needs, build it, and mount a
# sandbox with the defaults at ./sandbox (or the directory given), then show its status.
#
#   sudo scripts/mount-sandbox.sh [MOUNTPOINT]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release
mountpoint=${1:-$PWD/sandbox}
mkdir -p "$mountpoint"
.build/release/appbox mount "$mountpoint"
.build/release/appbox status "$mountpoint"
cat <<MSG

Mounted. Try:
  ls "$mountpoint"                       # Documents  Library  tmp
  .build/release/appbox unlock "$mountpoint"   # the device starts in BFU: protected files refuse until the first unlock
  .build/release/appbox --help
Unmount with: .build/release/appbox unmount "$mountpoint"
MSG
