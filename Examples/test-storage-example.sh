#!/bin/sh
# The example image's test of Examples/StorageExample, run inside `appbox run`: the
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

# Store, protect, exclude and measure, in the sandbox's directories.
check "$(appbox-storage-example)" \
  "documents=$HOME/Documents" \
  "caches=$HOME/Library/Caches" \
  'store.protection=FileProtectionType(rawValue: "NSFileProtectionComplete")' \
  'downloads.excluded=true' \
  'flip.excluded=false' \
  'large.write=refused by the capacity check' \
  'protectedDataAvailable=true'

# The program locks the device itself, sees its protected data go, and unlocks.
check "$(appbox-storage-example self-lock)" \
  'allowed=true' 'lock=LOCKED' 'available=false' 'unlock=UNLOCKED'

echo "test-storage-example: the program behaved as on a device (uid $(id -u), sandbox $HOME)"
