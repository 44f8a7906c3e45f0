#!/usr/bin/env bash
# The main job on a fresh machine: install what AppBox needs, build it, install the
# `appbox` command and its manual page, and mount a sandbox with the defaults at ./sandbox
# (or the directory given), then show its status.
#
#   scripts/mount-sandbox.sh [MOUNTPOINT]        (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release
# mount -t fuse.appbox and /etc/fstab find the program on the system's PATH.
install -D -m 0755 .build/release/appbox /usr/local/bin/appbox
install -D -m 0644 docs/appbox.1 /usr/local/share/man/man1/appbox.1
if ! command -v man >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends man-db >/dev/null
fi
mountpoint=${1:-$PWD/sandbox}
mkdir -p "$mountpoint"
if grep -qs " $(realpath "$mountpoint") fuse.appbox " /proc/mounts; then
  echo "$mountpoint is already an AppBox mount"
else
  appbox mount "$mountpoint"
fi
appbox status "$mountpoint"
cat <<MSG

Mounted at $mountpoint, the device UNLOCKED (appbox mount --bfu starts before the first
unlock). Try:
  echo hello > "$mountpoint/Documents/x" && cat "$mountpoint/Documents/x"
  appbox lock "$mountpoint"        # class-A files refuse once LOCKED (after 10 s of GRACE)
  appbox --help; man appbox
Unmount with: appbox unmount "$mountpoint"
MSG
