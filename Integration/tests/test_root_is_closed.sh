#!/usr/bin/env bash
# The container root takes no new entries and the layout cannot be removed (EPERM).
source "$(dirname "$0")/../lib.sh"

mount_sandbox --unlocked
assert_exit 1 touch "$MNT/stray"
assert_exit 1 mkdir "$MNT/extra"
assert_exit 1 rmdir "$MNT/tmp"
assert_exit 1 mv "$MNT/Library/Caches" "$MNT/Library/Elsewhere"
[[ -d "$MNT/tmp" && -d "$MNT/Library/Caches" ]] || fail "the layout changed"
mkdir -p "$MNT/Documents/a/b/c"
echo deep >"$MNT/Documents/a/b/c/file"
assert_eq deep "$(cat "$BACKING/Documents/a/b/c/file")" "nested file in the backing directory"
