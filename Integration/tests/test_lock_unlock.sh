#!/usr/bin/env bash
# Lock and unlock through the CLI; the root's user.appbox.device-state follows.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --bfu --grace 10s
assert_eq BFU "$(xattr "$MNT" user.appbox.device-state)" "state at mount"
assert_eq UNLOCKED "$("$APPBOX" unlock "$MNT")" "appbox unlock"
assert_eq UNLOCKED "$(xattr "$MNT" user.appbox.device-state)" "state after unlock"
assert_eq GRACE "$("$APPBOX" lock "$MNT")" "appbox lock with a grace period"
assert_eq GRACE "$(xattr "$MNT" user.appbox.device-state)" "state in the grace period"
"$APPBOX" unlock "$MNT" >/dev/null
assert_eq UNLOCKED "$(xattr "$MNT" user.appbox.device-state)" "state after unlocking in grace"

# The state is read-only from inside the sandbox.
assert_exit 1 setfattr -n user.appbox.device-state -v UNLOCKED "$MNT"
unmount_sandbox

mount_sandbox --unlocked --grace 0
assert_eq UNLOCKED "$(xattr "$MNT" user.appbox.device-state)" "state with --unlocked"
"$APPBOX" lock "$MNT" >/dev/null
assert_eq LOCKED "$(xattr "$MNT" user.appbox.device-state)" "state after lock with --grace 0"
