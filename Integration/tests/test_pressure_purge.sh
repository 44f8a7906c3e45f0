#!/usr/bin/env bash
# With a small capacity, writing to Documents purges Caches (least recently used first)
# instead of failing; Documents is never purged, and beyond what can be purged: ENOSPC.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --capacity 8M --unlocked
for i in 1 2 3 4 5 6; do head -c 1048576 /dev/urandom >"$MNT/Library/Caches/c$i"; done
assert_eq 6 "$(count_files "$MNT/Library/Caches")" "cache files after filling"

head -c $((4 * 1048576)) /dev/urandom >"$MNT/Documents/big" || fail "the Documents write failed"
assert_eq $((4 * 1048576)) "$(stat -c %s "$MNT/Documents/big")" "Documents file size"
left=$(count_files "$MNT/Library/Caches")
((left < 6)) || fail "no cache file was purged"
[[ -e "$MNT/Library/Caches/c1" ]] && fail "c1, the least recently used, survived"
grep -q '"reason":"pressure"' <("$APPBOX" events "$MNT") || fail "no pressure purge event"

# Documents cannot be purged: a write larger than everything left fails with ENOSPC.
error=$(head -c $((8 * 1048576)) /dev/zero 2>&1 >"$MNT/Documents/too-big") && fail "wrote past the capacity"
[[ "$error" == *"No space left"* ]] || fail "expected ENOSPC, got: $error"
assert_eq $((4 * 1048576)) "$(stat -c %s "$MNT/Documents/big")" "Documents file after ENOSPC"
