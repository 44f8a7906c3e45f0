#!/bin/sh
# The example image's test of two programs of Examples/, run inside `appbox run`: each
# program's own report (key=value lines) checked line by line. Exits 1 on the first
# line that differs, printing what the program said.
set -eu

check() {  # check OUTPUT LINE...: every LINE is a whole line of OUTPUT
  output=$1
  shift
  for line in "$@"; do
    printf '%s\n' "$output" | grep -qxF -- "$line" && continue
    printf 'FAIL: no line "%s" in what the program printed:\n%s\n' "$line" "$output" >&2
    exit 1
  done
}

# A JSON store in Application Support, written atomically with class complete (a
# backing directory used before holds earlier notes too).
store=$(appbox-example-document-store first second)
check "$store" \
  "documents=$HOME/Documents" \
  "support=$HOME/Library/Application Support" \
  'protection=FileProtectionType(rawValue: "NSFileProtectionComplete")' \
  'excluded=false'
printf '%s\n' "$store" | grep -qE '^notes=(.*,)?first,second$' || {
  printf 'FAIL: the notes do not end with first,second:\n%s\n' "$store" >&2
  exit 1
}

# The program locks the device itself, sees its class-A secret go, and unlocks.
check "$(appbox-example-protected-secret --lock-myself)" \
  'event=didBecomeAvailable' 'locked.read=257 1' 'unlocked.read=s3cret'

echo "test-examples: the programs behaved as on a device (uid $(id -u), sandbox $HOME)"
