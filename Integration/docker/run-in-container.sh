#!/usr/bin/env bash
# Builds the repository's Dockerfile and runs the Integration suite in a container.
#
#   Integration/docker/run-in-container.sh [--official] [TEST...]
#
# By default the base images are the local ones that make-local-base-images.sh makes
# (local/swift-bookworm, local/bookworm); --official uses the Dockerfile's defaults
# (swift:6.3-bookworm, debian:bookworm-slim) from a registry; BUILDER_IMAGE and
# RUNTIME_IMAGE override either. TEST names are passed to run.sh.
#
# The container gets /dev/fuse and CAP_SYS_ADMIN (to mount), and no AppArmor profile
# (Docker's default profile denies mount); never --privileged. DOCKER_HOST is honoured.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
image="${APPBOX_TEST_IMAGE:-appbox-integration}"
builder="${BUILDER_IMAGE:-local/swift-bookworm}"
runtime="${RUNTIME_IMAGE:-local/bookworm}"
if [[ "${1:-}" == "--official" ]]; then
  builder="${BUILDER_IMAGE:-swift:6.3-bookworm}"
  runtime="${RUNTIME_IMAGE:-debian:bookworm-slim}"
  shift
fi

[[ -e /dev/fuse ]] || { echo "run-in-container.sh: this machine has no /dev/fuse" >&2; exit 69; }

# The build's apt-get needs a network; the engine may run without its default bridge.
docker build --network host \
  --build-arg BUILDER_IMAGE="$builder" --build-arg RUNTIME_IMAGE="$runtime" \
  -t "$image" "$repo"

command=()
(($# > 0)) && command=(/opt/appbox/Integration/run.sh --binary /usr/local/bin/appbox "$@")
docker run --rm --network none \
  --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
  "$image" "${command[@]}"
