#!/usr/bin/env bash
# appbox status --json is valid JSON and shows the capacity, state and usage.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --capacity 64M --unlocked
head -c 100000 /dev/zero >"$MNT/Documents/blob"
json=$("$APPBOX" status --json "$MNT")
echo "$json" | python3 -m json.tool >/dev/null || fail "not JSON: $json"
field() { echo "$json" | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
assert_eq 67108864 "$(field '["capacity"]')" "capacity"
assert_eq UNLOCKED "$(field '["state"]')" "state"
(($(field '["usage"]["documents"]') >= 100000)) || fail "documents usage below the file's size: $json"
assert_eq 67108864 "$(xattr "$MNT" user.appbox.capacity)" "capacity attribute"

"$APPBOX" status "$MNT" | grep -q "capacity:" || fail "human-readable status has no capacity line"
