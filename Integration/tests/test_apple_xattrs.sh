#!/usr/bin/env bash
# Apple's attribute names round-trip on the mount and are stored under user.appbox.x.
source "$(dirname "$0")/../lib.sh"

mount_sandbox --unlocked
file="$MNT/Documents/photo.jpg"
echo "jpeg" >"$file"
setfattr -n com.apple.MobileBackup -v 0x01 "$file"
setfattr -n com.apple.metadata:com_apple_backup_excludeItem -v com.apple.backupd "$file"
setfattr -n user.mine -v plain "$file"

assert_eq 0x01 "$(xattr_hex "$file" com.apple.MobileBackup)" "MobileBackup"
assert_eq com.apple.backupd "$(xattr "$file" com.apple.metadata:com_apple_backup_excludeItem)" "excludeItem"
assert_eq plain "$(xattr "$file" user.mine)" "user.mine"
# Whether AppBox lists the class it stores on a new file (user.appbox.protection) is
# not this test's concern.
names=$(getfattr --absolute-names -m - "$file" | grep -v -e '^#' -e '^user.appbox.protection$' | sort | xargs)
assert_eq "com.apple.MobileBackup com.apple.metadata:com_apple_backup_excludeItem user.mine" "$names" "listxattr"

backing="$BACKING/Documents/photo.jpg"
assert_eq 0x01 "$(xattr_hex "$backing" user.appbox.x.com.apple.MobileBackup)" "backing name"
assert_eq plain "$(xattr "$backing" user.mine)" "user.mine in the backing file"

# The flag follows a rename; removing it works.
mv "$file" "$MNT/Documents/renamed.jpg"
assert_eq 0x01 "$(xattr_hex "$MNT/Documents/renamed.jpg" com.apple.MobileBackup)" "after rename"
setfattr -x com.apple.MobileBackup "$MNT/Documents/renamed.jpg"
assert_exit 1 getfattr -n com.apple.MobileBackup "$MNT/Documents/renamed.jpg"
