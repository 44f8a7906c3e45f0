#!/usr/bin/env bash
# The tests: builds and runs every test (unit, below the mount, mount, real programs,
# differential), then the end-to-end shell tests in Integration/ against the debug binary.
# Each part runs even when an earlier one failed (but what needs the build); prints how
# long each took, every skipped test with its reason, and one line at the end. When
# APPBOX_CI_SUMMARY names a file (.ci/run), the summary lines are appended there too.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
# The mounts' runtime files (pid, socket, log, events; one set per mountpoint, and every
# test mounts at a fresh temporary one) go to a directory of this run, removed after it.
XDG_RUNTIME_DIR=$(mktemp -d /tmp/appbox-test-runtime.XXXXXX)
export XDG_RUNTIME_DIR
log=$(mktemp /tmp/appbox-swift-test.XXXXXX)
trap 'rm -rf "$XDG_RUNTIME_DIR" "$log"' EXIT
failed=()
lines=()

timed() {  # timed NAME COMMAND...
  local name=$1 from=$SECONDS status
  shift
  "$@"
  status=$?
  echo "test.sh: $name took $((SECONDS - from)) s$( ((status == 0)) || echo ": FAILED (exit $status)")"
  ((status == 0)) || failed+=("$name")
  return "$status"
}

if timed "swift build" swift build --build-tests; then
  APPBOX_TRANSPORT=dev-fuse timed "swift test" \
    bash -c 'swift test --skip-build 2>&1 | tee "$1"; exit "${PIPESTATUS[0]}"' swift-test "$log"
  # Swift Testing's last line ("Test run with N tests in M suites passed after…") and
  # every skipped test or suite ("➜ Test NAME skipped: REASON").
  lines+=("swift test: $(grep -a 'Test run with' "$log" | tail -n 1 | sed 's/^[^T]*//')")
  while IFS= read -r skip; do lines+=("skipped: $skip"); done < <(grep -a '^➜ \(Test\|Suite\) ' "$log" | sed 's/^➜ //')
  # The mount tests again over FUSE over io_uring, the other transport that ships:
  # TransportTests fails if a daemon fell back to /dev/fuse. The kernel's switch is
  # host-wide: turned on here, explicitly, and put back as it was afterwards.
  switch=/sys/module/fuse/parameters/enable_uring
  was=$(cat "$switch" 2>/dev/null)
  # Put back however the run ends (an interrupted run left it on once).
  [ "$was" = N ] && [ "$(id -u)" -eq 0 ] && { echo 1 >"$switch"; } 2>/dev/null \
    && trap 'echo 0 >"$switch"; rm -rf "$XDG_RUNTIME_DIR" "$log"' EXIT && trap 'exit 130' INT TERM
  if [ "$was" = N ] && [ "$(cat "$switch")" = N ]; then
    # A container's /sys is read-only: the host's switch decides (docs/testing.md).
    lines+=("skipped: the mount tests over io_uring: $switch is off and cannot be turned on here (turn it on on the host)")
  elif [ -e "$switch" ] && [ "$(id -u)" -eq 0 ]; then
    APPBOX_TRANSPORT=io-uring timed "swift test (mounts over io_uring)" \
      bash -c 'swift test --skip-build --filter "MountTests|AppBoxKitTests" 2>&1 | tee "$1"; exit "${PIPESTATUS[0]}"' \
      swift-test "$log"
    [ "$was" = Y ] || echo 0 >"$switch"
    lines+=("swift test (mounts over io_uring): $(grep -a 'Test run with' "$log" | tail -n 1 | sed 's/^[^T]*//')")
    while IFS= read -r skip; do lines+=("skipped: (over io_uring) $skip"); done < <(grep -a '^➜ \(Test\|Suite\) ' "$log" | sed 's/^➜ //')
  elif [ "${CI:-}" = true ]; then
    echo "test.sh: cannot run the mount tests over io_uring (needs root and $switch: Linux 6.14+)" >&2
    failed+=("swift test (mounts over io_uring: not run, no $switch or not root)")
  else
    lines+=("swift test (mounts over io_uring): not run (needs root and $switch: Linux 6.14+)")
  fi
  timed "Integration/run.sh" bash -c 'bash Integration/run.sh --binary .build/debug/appbox | tee "$1"; exit "${PIPESTATUS[0]}"' \
    integration "$log"
  lines+=("Integration/run.sh: $(tail -n 1 "$log")")
else
  failed+=("swift test (not run: no build)" "Integration/run.sh (not run: no build)")
fi

skips=$(printf '%s\n' "${lines[@]}" | grep -c '^skipped: ')
lines+=("test.sh: ${#failed[@]} part(s) failed, $skips test(s) skipped$( ((${#failed[@]} == 0)) || echo ": ${failed[*]}")")
echo
printf '%s\n' "${lines[@]}"
[ -n "${APPBOX_CI_SUMMARY:-}" ] && printf '%s\n' "${lines[@]}" >>"$APPBOX_CI_SUMMARY"
((${#failed[@]} == 0))
