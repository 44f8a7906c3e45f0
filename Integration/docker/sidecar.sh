#!/usr/bin/env bash
# The sidecar scenario, end to end: one container serves a sandbox, another uses it.
#
#   Integration/docker/sidecar.sh
#
# - The sidecar (image appbox, /dev/fuse, CAP_SYS_ADMIN, no AppArmor profile) mounts the
#   sandbox, its backing on a Docker volume, at /shared/sandbox: /shared is a host
#   directory bound with `rshared` propagation, so the mount shows on the host.
# - The app (the same image, as uid 1000, every capability dropped, no-new-privileges,
#   no /dev/fuse) binds that host directory at /shared with `rslave` propagation and
#   sees the mount there, and every later mount or unmount.
# - The sidecar locks, unlocks and purges (`docker exec sidecar appbox ...`); the app
#   sees EPERM on its class-A file while locked, and its Caches files gone after a purge,
#   and cannot control the device itself.
#
# Needs root (the host directory is made a shared mount point of its own) and a Docker
# engine (DOCKER_HOST is honoured) with the image (APPBOX_IMAGE, default appbox; see
# build-images.sh). Removes its containers and volume, and unmounts what it mounted,
# whatever happens. Prints one line per check; exits 1 at the first that fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../asserts.sh"

image="${APPBOX_IMAGE:-appbox}"
run_id="appbox-sidecar-$$"
sidecar="$run_id-sidecar"
app="$run_id-app"
volume="$run_id-backing"

[[ $(id -u) == 0 ]] || { echo "sidecar.sh: run as root (it makes a shared mount point)" >&2; exit 77; }
[[ -e /dev/fuse ]] || { echo "sidecar.sh: this machine has no /dev/fuse" >&2; exit 69; }
docker image inspect "$image" >/dev/null || { echo "sidecar.sh: no image $image (Integration/docker/build-images.sh)" >&2; exit 69; }

shared=$(mktemp -d /tmp/appbox-sidecar.XXXXXX)
cleanup() {
  local status=$?
  set +e
  docker rm -f "$sidecar" "$app" >/dev/null 2>&1
  # A sidecar killed mid-way leaves its FUSE mount on the host directory, disconnected.
  grep -q " $shared/sandbox fuse" /proc/self/mounts && umount -l "$shared/sandbox"
  mountpoint -q "$shared" && umount "$shared"
  rm -rf --one-file-system "$shared"
  docker volume rm "$volume" >/dev/null 2>&1
  ((status == 0)) || echo "sidecar.sh: FAILED (exit $status)" >&2
  exit "$status"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for container in "$sidecar" "$app"; do
    echo "--- docker logs $container:" >&2
    docker logs "$container" 2>&1 | tail -n 20 >&2
  done
  exit 1
}
pass() { echo "ok: $*"; }

in_app() { docker exec "$app" "$@"; }
in_sidecar() { docker exec "$sidecar" "$@"; }

# The host directory: a mount point of its own, shared, so Docker may bind it rshared
# (and rslave); the sidecar's user (uid 1000) may mount on it.
mount --bind "$shared" "$shared"
mount --make-shared "$shared"
chown 1000:1000 "$shared"

docker volume create "$volume" >/dev/null
docker run -d --name "$sidecar" --network none \
  --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
  --mount "type=volume,source=$volume,target=/backing" \
  --mount "type=bind,source=$shared,target=/shared,bind-propagation=rshared" \
  "$image" appbox-sidecar /shared/sandbox --backing /backing --grace 0 >/dev/null
wait_until 30 grep -q " $shared/sandbox fuse.appbox " /proc/self/mounts
pass "the sidecar's mount shows on the host at $shared/sandbox"
assert_eq appbox "$(in_sidecar stat -c %U /backing/Documents)" "the backing's owner"
pass "the sidecar's daemon runs as the user appbox, its backing on volume $volume"

docker run -d --name "$app" --network none --user 1000:1000 --cap-drop ALL \
  --security-opt no-new-privileges \
  --mount "type=bind,source=$shared,target=/shared,bind-propagation=rslave" \
  "$image" sleep infinity >/dev/null
wait_until 10 in_app test -d /shared/sandbox/Library/Caches
pass "the app (uid 1000, no capabilities, no /dev/fuse) sees the sandbox at /shared/sandbox"
in_app test -e /dev/fuse && fail "the app has /dev/fuse"
assert_eq "/shared/sandbox|/shared/sandbox/Library/Caches" \
  "$(in_app appbox run /shared/sandbox -- sh -c 'echo "$HOME|$XDG_CACHE_HOME"')" "appbox run's environment in the app"
pass "in the app, appbox run /shared/sandbox -- CMD runs CMD in the sidecar's sandbox"

# The app writes; the data lands in the sidecar's backing volume.
in_app sh -c 'echo notes > /shared/sandbox/Documents/notes.txt'
in_app sh -c 'echo s3cret > /shared/sandbox/Documents/secret.db'
in_app setfattr -n user.appbox.protection -v complete /shared/sandbox/Documents/secret.db
assert_eq notes "$(in_sidecar cat /backing/Documents/notes.txt)" "the app's file in the backing"
assert_eq complete "$(in_sidecar getfattr --absolute-names --only-values -n user.appbox.protection /backing/Documents/secret.db)" \
  "the class of the app's file in the backing"
pass "the app's files and their class are in the backing volume"

# The app cannot control the device: it has no way to the sidecar's control channel.
status=0
in_app appbox lock /shared/sandbox >/dev/null 2>&1 || status=$?
((status != 0)) || fail "the app locked the device"
[[ $(in_sidecar appbox status --json /shared/sandbox) == *'"state":"UNLOCKED"'* ]] || fail "the state changed"
pass "the app cannot lock (appbox lock exits $status there)"

# Lock from the sidecar: class A is refused to the app, class C is not.
in_sidecar appbox lock /shared/sandbox >/dev/null
wait_until 10 in_sidecar sh -c 'appbox status --json /shared/sandbox | grep -q "\"state\":\"LOCKED\""'
status=0
message=$(in_app cat /shared/sandbox/Documents/secret.db 2>&1) || status=$?
((status != 0)) || fail "the app read a class-A file while locked: $message"
[[ "$message" == *"Operation not permitted"* ]] || fail "while locked the app got '$message', not EPERM"
assert_eq notes "$(in_app cat /shared/sandbox/Documents/notes.txt)" "a class-C file while locked"
pass "locked by the sidecar: the app gets EPERM on its class-A file ('$message')"

in_sidecar appbox unlock /shared/sandbox >/dev/null
assert_eq s3cret "$(in_app cat /shared/sandbox/Documents/secret.db)" "the class-A file after the unlock"
pass "unlocked by the sidecar: the app reads it again"

# Purge from the sidecar: the app's Caches files are gone at once, its Documents stay.
in_app sh -c 'mkdir -p /shared/sandbox/Library/Caches/images && for i in 1 2 3; do
  head -c 65536 /dev/zero > /shared/sandbox/Library/Caches/images/$i.png; done; ls /shared/sandbox/Library/Caches/images >/dev/null'
in_sidecar appbox purge /shared/sandbox --domain caches --all >/dev/null
in_app test -e /shared/sandbox/Library/Caches/images/1.png && fail "a purged file is still there for the app"
assert_eq 0 "$(in_app find /shared/sandbox/Library/Caches -type f | wc -l)" "files in Caches after the purge"
assert_eq notes "$(in_app cat /shared/sandbox/Documents/notes.txt)" "Documents after the purge"
purged=$(in_sidecar appbox events /shared/sandbox | grep -c '"reason":"explicit"' || true)
assert_eq 3 "$purged" "explicit purges in the sidecar's events"
pass "purged by the sidecar: the app's 3 Caches files are gone for it, $purged purge events"

# The sidecar's log holds the events (JSON Lines) for whoever collects the logs.
logged=$(docker logs "$sidecar" 2>/dev/null | grep -c '"type":"purge"' || true)
assert_eq 3 "$logged" "purge events in the sidecar's log"
pass "the sidecar's log streams the events ($logged purges)"

# Stop the sidecar: it prints its final status and unmounts; the mount is gone on the
# host and for the app; the sidecar ends cleanly; the data stays on the volume.
docker stop "$sidecar" >/dev/null
assert_eq 0 "$(docker inspect -f '{{.State.ExitCode}}' "$sidecar")" "the stopped sidecar's exit code"
docker logs "$sidecar" 2>/dev/null | tail -n 1 | grep -q '"state":"UNLOCKED".*"purges":3' \
  || fail "the sidecar's last log line is not its final status with 3 purges"
grep -q " $shared/sandbox fuse" /proc/self/mounts && fail "the mount is still on the host after the sidecar stopped"
in_app test -d /shared/sandbox/Documents && fail "the app still sees the sandbox after the sidecar stopped"
assert_eq notes "$(docker run --rm --network none --mount "type=volume,source=$volume,target=/backing" "$image" \
  cat /backing/Documents/notes.txt)" "the data on the volume after the sidecar ended"
pass "stopped: the sidecar logged its final status, unmounted (gone on the host and for the app) and exited 0; the data is on the volume"
echo "sidecar.sh: every check passed"
