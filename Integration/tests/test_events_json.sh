#!/usr/bin/env bash
# appbox events prints JSON Lines: state changes, refusals and purges, each a JSON object.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --unlocked --grace 0
echo "a" >"$MNT/Documents/a"
"$APPBOX" protect "$MNT/Documents/a" --class complete >/dev/null
echo "c" >"$MNT/Library/Caches/c"
"$APPBOX" lock "$MNT" >/dev/null
cat "$MNT/Documents/a" 2>/dev/null && fail "read a class-A file while locked"
"$APPBOX" purge "$MNT" --domain caches --all >/dev/null

events() { "$APPBOX" events "$MNT"; }
wait_until 5 sh -c "'$APPBOX' events '$MNT' | grep -q '\"type\":\"purge\"'"
types=$(events | python3 -c '
import json, sys
types = set()
for line in sys.stdin:
    event = json.loads(line)
    assert isinstance(event, dict) and "time" in event, line
    types.add(event["type"])
print(" ".join(sorted(types)))
') || fail "events are not JSON Lines: $(events)"
assert_eq "log purge refusal state usage" "$types" "event types (log: the header; usage: the samples at mount and after the purge)"
events | grep '"type":"refusal"' | grep -q '"path":"Documents/a"' || fail "the refusal does not name Documents/a"
