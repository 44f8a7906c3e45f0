#!/usr/bin/env bash
# Runs the Integration suite in a container of the image (building it first).
#
#   Integration/docker/run-in-container.sh [--official | --no-build] [TEST...]
#
# The image is built by build-images.sh (--official: from the official base images;
# --no-build: use the image as it is). TEST names are passed to run.sh. APPBOX_IMAGE
# names the image (default appbox); DOCKER_HOST is honoured.
#
# The container gets /dev/fuse and CAP_SYS_ADMIN (to mount), and no AppArmor profile
# (Docker's default profile denies mount); never --privileged. The suite runs as the
# image's user appbox (uid 1000), not root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image="${APPBOX_IMAGE:-appbox}"
case "${1:-}" in
--official) "$here/build-images.sh" --official; shift ;;
--no-build) shift ;;
*) "$here/build-images.sh" ;;
esac

[[ -e /dev/fuse ]] || { echo "run-in-container.sh: this machine has no /dev/fuse" >&2; exit 69; }
command=()
(($# > 0)) && command=(/opt/appbox/Integration/run.sh --binary /usr/local/bin/appbox "$@")
docker run --rm --network none \
  --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
  "$image" "${command[@]}"
