#!/usr/bin/env bash
# The image as a tool: `appbox run` in a container returns the command's status, runs it
# as the image's user appbox (not root), in a sandbox of its own; and the example image
# FROM it (Examples/Dockerfile) passes its test of the example program.
#
#   Integration/docker/tool.sh
#
# Needs a Docker engine (DOCKER_HOST is honoured) with the images of build-images.sh
# (APPBOX_IMAGE, default appbox, and APPBOX_IMAGE-example). Exits 1 at the first check
# that fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../asserts.sh"

image="${APPBOX_IMAGE:-appbox}"
fuse=(--network none --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined)

out=$(docker run --rm "${fuse[@]}" "$image" appbox run -- sh -c '
  echo "uid=$(id -u)"
  echo "home=$HOME"
  echo data > "$HOME/Documents/file" && cat "$HOME/Documents/file"
  exit 3') && status=0 || status=$?
((status == 3)) || fail "appbox run in the image exited $status, expected the command's 3: $out"
grep -qx 'uid=1000' <<<"$out" || fail "the command did not run as uid 1000: $out"
grep -qx 'home=/tmp/appbox-run-.*/container' <<<"$out" || fail "HOME is not the sandbox: $out"
grep -qx 'data' <<<"$out" || fail "the command could not write Documents: $out"
echo "ok: docker run $image appbox run -- CMD ran CMD as uid 1000 in a fresh sandbox and returned its status 3"

assert_exit 69 docker run --rm --network none "$image" appbox run -- true
echo "ok: without /dev/fuse, appbox run says FUSE is unavailable (exit 69)"

docker run --rm "${fuse[@]}" "$image-example" || fail "the example image's test failed"
echo "ok: the example image ($image-example, FROM $image) passed its test of the example program"
