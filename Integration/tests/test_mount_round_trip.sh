#!/usr/bin/env bash
# Mount, see the sandbox layout, write through the mount, unmount, find the data in the
# backing directory, mount again and read it back.
source "$(dirname "$0")/../lib.sh"

mount_sandbox
for dir in Documents "Library/Application Support" Library/Preferences Library/Caches tmp; do
  [[ -d "$MNT/$dir" ]] || fail "$dir missing on the mount"
  [[ -d "$BACKING/$dir" ]] || fail "$dir missing in the backing directory"
done
assert_eq "Documents Library tmp" "$(ls "$MNT" | sort | xargs)" "root entries"

"$APPBOX" unlock "$MNT" >/dev/null
echo "hello" >"$MNT/Documents/note.txt"
unmount_sandbox
assert_eq "hello" "$(cat "$BACKING/Documents/note.txt")" "backing file after unmount"

"$APPBOX" mount --backing "$BACKING" "$MNT" --unlocked
assert_eq "hello" "$(cat "$MNT/Documents/note.txt")" "file after remount"
unmount_sandbox
