#!/usr/bin/env bash
# Runs AppBox's end-to-end tests: every Integration/tests/test_*.sh, one case per file.
#
#   Integration/run.sh [--binary PATH] [TEST...]
#
# TEST is a file name with or without test_ and .sh (lock_unlock, test_lock_unlock.sh).
# The binary defaults to `appbox` on PATH, else the package's .build/release/appbox.
# Prints one line per test and `N passed, M failed`; exits 1 if any test failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binary=""
selected=()
while (($# > 0)); do
  case "$1" in
  --binary)
    (($# >= 2)) || { echo "run.sh: --binary needs a path" >&2; exit 64; }
    binary="$2"
    shift 2
    ;;
  -h | --help)
    sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "run.sh: unknown option $1" >&2
    exit 64
    ;;
  *)
    selected+=("$1")
    shift
    ;;
  esac
done

if [[ -z "$binary" ]]; then
  if command -v appbox >/dev/null; then binary=$(command -v appbox); else binary="$here/../.build/release/appbox"; fi
fi
[[ -x "$binary" ]] || { echo "run.sh: $binary is not an executable; build it or pass --binary" >&2; exit 66; }
APPBOX=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
export APPBOX

tests=()
if ((${#selected[@]} == 0)); then
  tests=("$here"/tests/test_*.sh)
else
  for name in "${selected[@]}"; do
    name=$(basename "$name" .sh)
    name="test_${name#test_}"
    [[ -f "$here/tests/$name.sh" ]] || { echo "run.sh: no test $name in $here/tests" >&2; exit 64; }
    tests+=("$here/tests/$name.sh")
  done
fi

# Each test runs in its own bash with a deadline; its output is shown only when it fails.
per_test_timeout="${APPBOX_IT_TIMEOUT:-30}"
log=$(mktemp "${TMPDIR:-/tmp}/appbox-it-log.XXXXXX")
trap 'rm -f "$log"' EXIT
passed=0
failed=0
for test in "${tests[@]}"; do
  name=$(basename "$test" .sh)
  start=${EPOCHREALTIME/./}
  status=0
  timeout --kill-after=5 "$per_test_timeout" bash "$test" >"$log" 2>&1 || status=$?
  tenths=$(((${EPOCHREALTIME/./} - start) / 100000))
  elapsed="$((tenths / 10)).$((tenths % 10))"
  if ((status == 0)); then
    passed=$((passed + 1))
    printf 'PASS %-32s %ss\n' "$name" "$elapsed"
  else
    failed=$((failed + 1))
    ((status == 124)) && echo "timed out after ${per_test_timeout}s" >>"$log"
    printf 'FAIL %-32s %ss (exit %d)\n' "$name" "$elapsed" "$status"
    sed 's/^/    /' "$log"
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
