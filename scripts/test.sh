#!/usr/bin/env bash
# The test command: builds and runs every test (unit, mount, real programs, differential).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
swift build
swift test
