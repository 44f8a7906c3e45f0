#!/usr/bin/env bash
# The test command: builds and runs every test (unit, mount, real programs, differential),
# then the end-to-end shell tests in Integration/ against the debug binary.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
swift build
swift test
bash Integration/run.sh --binary .build/debug/appbox
