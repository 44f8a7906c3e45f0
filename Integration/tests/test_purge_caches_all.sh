#!/usr/bin/env bash
# appbox purge --domain caches --all empties Caches and leaves Documents and tmp alone.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --unlocked
mkdir -p "$MNT/Library/Caches/images"
for i in 1 2 3 4 5; do head -c 50000 /dev/zero >"$MNT/Library/Caches/images/c$i"; done
head -c 50000 /dev/zero >"$MNT/Library/Caches/top"
echo keep >"$MNT/Documents/keep"
echo scratch >"$MNT/tmp/scratch"
assert_eq 6 "$(count_files "$MNT/Library/Caches")" "cache files before the purge"

"$APPBOX" purge "$MNT" --domain caches --all | grep -q "purged 6 files" || fail "purge did not report 6 files"
assert_eq 0 "$(count_files "$MNT/Library/Caches")" "cache files on the mount"
assert_eq 0 "$(count_files "$BACKING/Library/Caches")" "cache files in the backing directory"
assert_eq keep "$(cat "$MNT/Documents/keep")" "Documents after the purge"
assert_eq scratch "$(cat "$MNT/tmp/scratch")" "tmp after a caches purge"
