#!/usr/bin/env bash
# CI's container part: builds the image and runs both container scenarios against a
# Docker engine of its own, then stops it and removes everything it made.
#
#   Integration/docker/ci.sh
#
# Runs as root on Debian 12 (no systemd needed): installs docker.io and debootstrap,
# starts dockerd by hand (its own data root, exec root, pid file and socket under a
# temporary directory; no iptables, no bridge), makes the local base images from the
# mirror in this machine's apt configuration, builds the Dockerfile, runs the suite in
# the image, the image as a tool (`appbox run`, and the example image FROM it), the
# sidecar scenario and the README's container blocks, then stops dockerd by its PID and
# removes its data. Prints how long each part took. Fails when Docker cannot run, except
# inside a container (below), where it says it skipped.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$repo/Integration/docker"

part() {  # part NAME COMMAND...: runs COMMAND and prints its duration; stops at a failure
  local name=$1 from=$SECONDS
  shift
  "$@"
  echo "CI (containers): $name took $((SECONDS - from)) s"
}

failed=()
check() {  # check NAME COMMAND...: as part, but what comes after runs even if it fails
  local name=$1 from=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "CI (containers): $name took $((SECONDS - from)) s$( ((status == 0)) || echo ": FAILED (exit $status)")"
  ((status == 0)) || failed+=("$name")
}

[[ $(id -u) == 0 ]] || { echo "ci.sh: run as root (dockerd, debootstrap)" >&2; exit 77; }

# Inside a plain container (the recipe of docs/testing.md) no Docker engine can run: its
# /sys is read-only, so dockerd can make no cgroup or network for a container, and
# AppBox's recipe never uses --privileged. The part is then skipped, and said.
if awk '$2 == "/sys" && $4 ~ /(^|,)ro(,|$)/ {found = 1} END {exit !found}' /proc/self/mounts; then
  reason="skipped: the container part (Integration/docker/ci.sh): /sys is read-only (a container without --privileged), where dockerd cannot run"
  echo "ci.sh: $reason"
  [[ -n "${APPBOX_CI_SUMMARY:-}" ]] && echo "$reason" >>"$APPBOX_CI_SUMMARY"
  exit 0
fi

install_packages() {
  local missing=() p
  for p in docker.io debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No service starts here (no systemd); dockerd is started below, by hand.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
part "installing docker.io and debootstrap" install_packages

# Everything of this engine lives under one directory, removed at the end. The client is
# the one docker.io installed (/usr/bin/docker, the engine's own version), whatever else
# is on PATH, with a configuration directory of its own (no credentials read).
state=$(mktemp -d /var/tmp/appbox-dockerd.XXXXXX)
mkdir "$state/bin" "$state/config"
ln -s /usr/bin/docker "$state/bin/docker"
echo '{}' >"$state/daemon.json"
export PATH="$state/bin:$PATH" DOCKER_CONFIG="$state/config" DOCKER_HOST="unix://$state/docker.sock"
dockerd_pid=""

stop_dockerd() {
  local status=$? from=$SECONDS
  set +e
  if [[ -n "$dockerd_pid" ]] && kill -0 "$dockerd_pid" 2>/dev/null; then
    # Containers left by a failed step go first, so nothing of theirs stays mounted.
    local left
    left=$(docker ps -aq 2>/dev/null)
    [[ -n "$left" ]] && docker rm -f $left >/dev/null 2>&1
    kill -TERM "$dockerd_pid"
    for _ in $(seq 1 150); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$dockerd_pid" 2>/dev/null; then
      echo "ci.sh: dockerd $dockerd_pid did not stop in 30 s; killing it" >&2
      kill -KILL "$dockerd_pid"
    fi
    wait "$dockerd_pid" 2>/dev/null
  fi
  # Overlay and shm mounts under the data root must go before its files do.
  grep -o " $state/[^ ]*" /proc/self/mounts | sort -r | while read -r target; do umount -l "$target"; done
  rm -rf "$state"
  echo "CI (containers): stopping dockerd (pid $dockerd_pid) and removing its data took $((SECONDS - from)) s"
  exit "$status"
}
trap stop_dockerd EXIT

start_dockerd() {
  dockerd --config-file "$state/daemon.json" \
    --data-root "$state/data" --exec-root "$state/exec" --pidfile "$state/dockerd.pid" \
    --host "$DOCKER_HOST" --iptables=false --bridge=none >"$state/dockerd.log" 2>&1 &
  dockerd_pid=$!
  local deadline=$((SECONDS + 60))
  until docker version >/dev/null 2>&1; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "ci.sh: dockerd did not start; its log:" >&2
      tail -n 30 "$state/dockerd.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  docker version --format 'client {{.Client.Version}}, engine {{.Server.Version}}'
}
part "starting dockerd" start_dockerd

part "making the local base images" env APPBOX_IMAGE_WORK="$state/base-images" "$here/make-local-base-images.sh"
part "building the image" "$here/build-images.sh"
check "running the suite in the image" "$here/run-in-container.sh" --no-build
check "running appbox run in the image" "$here/tool.sh"
check "running the sidecar scenario" "$here/sidecar.sh"
check "running the README's container blocks" python3 "$repo/scripts/readme-doctest.py" --only docker
((${#failed[@]} == 0)) || { echo "ci.sh: failed: ${failed[*]}" >&2; exit 1; }
