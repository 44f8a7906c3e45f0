#!/usr/bin/env bash
# A quota experiment: a schedule squeezes the sandbox while caches are in use, then gives
# room back; the app re-creates what the squeeze purged, and status counts the cost.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --capacity 16M --unlocked
for i in 1 2 3 4 5 6; do head -c 1048576 /dev/urandom >"$MNT/Library/Caches/c$i"; done

make_temp_dir dir
schedule="$dir/schedule"
printf '# squeeze, then give some back\n0s 100%%\n500ms 3M\n1s 50%%\n' >"$schedule"
"$APPBOX" pressure "$MNT" --schedule "$schedule" >/dev/null || fail "appbox pressure failed"
assert_eq 8388608 "$("$APPBOX" status --json "$MNT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"])')" \
  "capacity after the schedule"
assert_eq 3 "$(grep -c '"type":"capacity".*"reason":"schedule"' <("$APPBOX" events "$MNT"))" "capacity events"
grep -q '"reason":"shrink"' <("$APPBOX" events "$MNT") || fail "the squeeze purged nothing"
[[ -e "$MNT/Library/Caches/c1" ]] && fail "c1, the least recently used, survived the squeeze"

# The app fetches c1 again: one missed lookup, one re-creation.
[[ -e "$MNT/Library/Caches/c1" ]] || head -c 1048576 /dev/urandom >"$MNT/Library/Caches/c1"
"$APPBOX" status "$MNT" | grep -q 'purge cost:  1 purged files created again' || fail "status shows no purge cost"

assert_exit 65 "$APPBOX" resize "$MNT" --capacity 512K
assert_exit 0 "$APPBOX" resize "$MNT" --capacity 32M
