#!/usr/bin/env bash
# The documented exit codes: 64 usage, 65 bad value, 66 missing path, 75 busy.
# Every value is checked before anything is touched.
source "$(dirname "$0")/../lib.sh"

assert_exit 64 "$APPBOX" frobnicate
assert_exit 64 "$APPBOX"
assert_exit 0 "$APPBOX" --help

make_temp_dir dir
mkdir "$dir/backing" "$dir/mnt"
assert_exit 65 "$APPBOX" mount --backing "$dir/backing" --capacity banana "$dir/mnt"
assert_exit 65 "$APPBOX" mount --backing "$dir/backing" --grace soon "$dir/mnt"
assert_exit 65 "$APPBOX" mount --backing "$dir/backing" --capacity 1 "$dir/mnt"
assert_exit 65 "$APPBOX" mount --backing "$dir/backing" --tmp-max-age 200000000000000d "$dir/mnt"
assert_exit 65 "$APPBOX" mount --backing "$dir/backing" -o max_read=abc "$dir/mnt"
assert_exit 64 "$APPBOX" mount --backing "$dir/backing" -o subtype=other "$dir/mnt"
assert_exit 64 "$APPBOX" mount --backing "$dir/backing" --ready-fd 1 "$dir/mnt"
assert_exit 64 "$APPBOX" mount --backing
lines=$({ "$APPBOX" mount --backing 2>&1 || true; } | wc -l)
assert_eq 2 "$lines" "lines of a usage error (the message and 'see appbox mount --help')"
mkdir "$dir/full" && touch "$dir/full/entry"
assert_exit 66 "$APPBOX" mount --backing "$dir/backing" "$dir/full"
is_mounted "$dir/full" && fail "a mountpoint with an entry was mounted over without --nonempty"
[[ -z "$(ls -A "$dir/backing")" ]] || fail "a refused mount touched the backing directory"
assert_exit 66 "$APPBOX" mount --backing "$dir/backing" "$dir/no-such-mountpoint"
assert_exit 66 "$APPBOX" mount --backing "$dir/no-such-backing" "$dir/mnt"
is_mounted "$dir/mnt" && fail "a refused mount left $dir/mnt mounted"

mount_sandbox
assert_exit 75 "$APPBOX" mount --backing "$BACKING" "$MNT"
assert_exit 75 "$APPBOX" mount --backing "$BACKING" "$dir/mnt"
assert_exit 65 "$APPBOX" purge "$MNT" --older-than 200000000000000d
assert_exit 66 "$APPBOX" protect "$dir/backing" --class complete
"$APPBOX" status "$MNT" >/dev/null || fail "the daemon did not survive the refused requests"
assert_exit 75 "$APPBOX" unmount "$dir/mnt"
is_mounted "$MNT" || fail "the second mount attempt broke the first"
