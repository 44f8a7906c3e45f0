#!/bin/sh
# appbox-sidecar MOUNTPOINT [MOUNT OPTION...]: serves a sandbox to other containers.
#
# MOUNTPOINT is a directory inside the volume shared with them (made if missing: AppBox
# does not mount on the volume's own mount point). Mounts it with allow_other (the other
# containers' users and root reach it; the image's /etc/fuse.conf allows it), then
# prints the mount's events as JSON Lines on standard output, the container's log,
# until the mount goes away (`appbox unmount` from `docker exec`) or a SIGTERM or SIGINT
# comes (`docker stop`, the end of a pod): then it prints the mount's final
# `appbox status --json` line and unmounts. Lock, unlock and purge come from
# `docker exec` (`kubectl exec`) running `appbox` in this container.
set -eu
[ "$#" -ge 1 ] || { echo "usage: appbox-sidecar MOUNTPOINT [MOUNT OPTION...]" >&2; exit 64; }
mountpoint=$1
shift
mkdir -p "$mountpoint"
appbox mount -o allow_other "$@" "$mountpoint"
finish() {
  kill "$events" 2>/dev/null || true
  appbox status --json "$mountpoint"
  appbox unmount "$mountpoint"
  exit 0
}
trap finish TERM INT
appbox events --follow "$mountpoint" &
events=$!
wait "$events" || true
