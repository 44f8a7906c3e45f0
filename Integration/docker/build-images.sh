#!/usr/bin/env bash
# Builds the repository's images:
#
#   appbox          the Dockerfile: the tool, the sidecar and (by default) the suite
#   appbox-build    its build stage, which holds the example program as well
#   appbox-example  Examples/Dockerfile: an image FROM appbox that tests the example
#
#   Integration/docker/build-images.sh [--official]
#
# By default the base images are the local ones that make-local-base-images.sh makes
# (local/swift-bookworm, local/bookworm); --official uses the Dockerfile's defaults
# (swift:6.3-bookworm, debian:bookworm-slim) from a registry; BUILDER_IMAGE and
# RUNTIME_IMAGE override either. APPBOX_IMAGE names the first image (the others get its
# name with -build and -example). DOCKER_HOST is honoured.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
image="${APPBOX_IMAGE:-appbox}"
builder="${BUILDER_IMAGE:-local/swift-bookworm}"
runtime="${RUNTIME_IMAGE:-local/bookworm}"
if [[ "${1:-}" == "--official" ]]; then
  builder="${BUILDER_IMAGE:-swift:6.3-bookworm}"
  runtime="${RUNTIME_IMAGE:-debian:bookworm-slim}"
fi

# The builds' apt-get needs a network; the engine may run without its default bridge.
build=(docker build --network host --build-arg BUILDER_IMAGE="$builder" --build-arg RUNTIME_IMAGE="$runtime")
"${build[@]}" -t "$image" "$repo"
# From the cache of the build above: no second compilation.
"${build[@]}" --target build -t "$image-build" "$repo" >/dev/null
docker build --network host --build-arg APPBOX_IMAGE="$image" --build-arg PROGRAM_IMAGE="$image-build" \
  -t "$image-example" "$repo/Examples"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "^$image"
