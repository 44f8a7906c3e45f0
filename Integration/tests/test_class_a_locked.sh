#!/usr/bin/env bash
# A class-A (complete) file is refused (EPERM) while locked and readable after unlock;
# a class-D file stays readable.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --unlocked --grace 0
echo "secret" >"$MNT/Documents/secret.txt"
echo "public" >"$MNT/Documents/public.txt"
"$APPBOX" protect "$MNT/Documents/secret.txt" --class complete >/dev/null
"$APPBOX" protect "$MNT/Documents/public.txt" --class none >/dev/null
assert_eq complete "$(xattr "$MNT/Documents/secret.txt" user.appbox.protection)" "class attribute"

"$APPBOX" lock "$MNT" >/dev/null
error=$(cat "$MNT/Documents/secret.txt" 2>&1) && fail "read a class-A file while locked"
[[ "$error" == *"Operation not permitted"* ]] || fail "expected EPERM, got: $error"
assert_exit 1 bash -c "echo more >>'$MNT/Documents/secret.txt'"
assert_eq "public" "$(cat "$MNT/Documents/public.txt")" "class-D file while locked"
stat "$MNT/Documents/secret.txt" >/dev/null || fail "stat is never refused"

"$APPBOX" unlock "$MNT" >/dev/null
assert_eq "secret" "$(cat "$MNT/Documents/secret.txt")" "class-A file after unlock"
