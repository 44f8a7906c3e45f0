# Assertions shared by the integration tests (through lib.sh) and the container scripts
# in docker/: fail, assert_eq, assert_exit, wait_until. A script may define fail again
# after sourcing this (to print more before it ends).

# fail MESSAGE...: reports a failure and ends the test.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# assert_eq EXPECTED ACTUAL [WHAT]: fails unless the two strings are equal.
assert_eq() {
  local expected="$1" actual="$2" what="${3:-value}"
  [[ "$expected" == "$actual" ]] || fail "$what: expected '$expected', got '$actual'"
}

# assert_exit CODE COMMAND...: runs COMMAND and fails unless it exits with CODE.
assert_exit() {
  local expected="$1"
  shift
  local status=0
  "$@" >/dev/null 2>&1 || status=$?
  [[ "$status" == "$expected" ]] || fail "'$*' exited $status, expected $expected"
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds; fails
# once SECONDS have passed.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out waiting for: $*"
    sleep 0.1
  done
}
