#!/usr/bin/env bash
# The test command: builds and runs every test (unit, mount, real programs, differential),
# then the end-to-end shell tests in Integration/ against the debug binary. Prints how
# long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
# The mounts' runtime files (pid, socket, log, events; one set per mountpoint, and every
# test mounts at a fresh temporary one) go to a directory of this run, removed after it.
XDG_RUNTIME_DIR=$(mktemp -d /tmp/appbox-test-runtime.XXXXXX)
export XDG_RUNTIME_DIR
trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
timed() {  # timed NAME COMMAND...
  local name=$1 from=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - from)) s"
}
timed "swift build" swift build
timed "swift test" swift test
timed "Integration/run.sh" bash Integration/run.sh --binary .build/debug/appbox
