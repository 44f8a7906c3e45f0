#!/usr/bin/env bash
# appbox run: a shell program sees the sandbox through HOME, XDG_* and TMPDIR; its exit
# status (128+N for a signal) is the run's; the run's mount is gone afterwards; the program
# cannot lock without --allow-device-control; the example programs do what a device shows.
source "$(dirname "$0")/../lib.sh"

make_temp_dir dir
mkdir "$dir/backing"
out=$("$APPBOX" run --backing "$dir/backing" -- sh -c '
  echo "$HOME|$XDG_DATA_HOME|$XDG_CACHE_HOME|$XDG_CONFIG_HOME|$TMPDIR" | sed "s#$APPBOX_CONTAINER#ROOT#g"
  echo "$APPBOX_CONTAINER"
  echo kept > "$XDG_DATA_HOME/kept"; echo scratch > "$TMPDIR/scratch"')
container=$(sed -n 2p <<<"$out")
assert_eq "ROOT|ROOT/Library/Application Support|ROOT/Library/Caches|ROOT/Library/Preferences|ROOT/tmp" \
  "$(sed -n 1p <<<"$out")" "environment"
assert_eq kept "$(cat "$dir/backing/Library/Application Support/kept")" "Application Support in the backing"
assert_eq scratch "$(cat "$dir/backing/tmp/scratch")" "tmp in the backing"
grep -q " $dir/" /proc/self/mounts && fail "a mount of the run is left"
[[ $container == /*/appbox-run-*/container ]] || fail "the run's container: $container"
grep -q " $container " /proc/self/mounts && fail "the run's temporary mount is left"
[[ -e $container ]] && fail "the run's temporary directory is left"

assert_exit 3 "$APPBOX" run -- sh -c 'exit 3'
assert_exit 143 "$APPBOX" run -- sh -c 'kill -TERM $$'
assert_exit 127 "$APPBOX" run -- appbox-no-such-program
assert_exit 64 "$APPBOX" run sh -c true

# An existing mount is reused and stays mounted.
mount_sandbox --unlocked
assert_eq "$MNT" "$("$APPBOX" run "$MNT" -- sh -c 'echo "$HOME"')" "reused mount's root"
is_mounted "$MNT" || fail "appbox run unmounted a mount it did not make"

# The program cannot change the device unless the run allows it; the terminal always can.
assert_eq 77 "$("$APPBOX" run "$MNT" -- sh -c '"$0" lock "$1" 2>/dev/null; echo $?' "$APPBOX" "$MNT")" "lock from the program"
assert_eq UNLOCKED "$(xattr "$MNT" user.appbox.device-state)" "state after a refused lock"
assert_eq 0 "$("$APPBOX" run --allow-device-control "$MNT" -- sh -c '"$0" lock "$1" >/dev/null; echo $?' "$APPBOX" "$MNT")" "lock allowed"
assert_eq UNLOCKED "$("$APPBOX" unlock "$MNT")" "unlock from the terminal"

# The example programs (Examples/), built next to appbox by swift build.
examples=$(dirname "$APPBOX")
if [[ ! -x "$examples/appbox-example-document-store" ]]; then
  echo "note: no example programs next to $APPBOX (swift build builds them); their checks are skipped" >&2
  exit 0
fi
"$APPBOX" run "$MNT" -- "$examples/appbox-example-document-store" first >/dev/null
out=$("$APPBOX" run "$MNT" -- "$examples/appbox-example-document-store" second)
grep -qx "notes=first,second" <<<"$out" || fail "document store: $out"
assert_eq complete "$(xattr "$BACKING/Library/Application Support/notes.json" user.appbox.protection)" "notes.json class"

mkdir "$TEST_DIR/source"
head -c 3000 /dev/urandom >"$TEST_DIR/source/a.png"
run_cache() { "$APPBOX" run "$MNT" -- "$examples/appbox-example-image-cache" "$TEST_DIR/source" a.png; }
assert_eq "a.png=fetched,memory,3000" "$(run_cache)" "image cache, first run"
assert_eq "a.png=disk,memory,3000" "$(run_cache)" "image cache, second run"
"$APPBOX" purge "$MNT" --domain caches --all >/dev/null
assert_eq "a.png=fetched,memory,3000" "$(run_cache)" "image cache after a purge"

out=$("$APPBOX" run "$MNT" -- "$examples/appbox-example-downloads" episode.mp3 1000)
grep -qx "file.excluded=true" <<<"$out" || fail "downloads: $out"
xattr "$BACKING/Library/Application Support/Downloads" user.appbox.x.com.apple.metadata:com_apple_backup_excludeItem >/dev/null ||
  fail "the Downloads folder has no exclusion attribute in the backing"

out=$("$APPBOX" run "$MNT" -- "$examples/appbox-example-capacity-check" 999999999999)
grep -q "^write=declined: needs 999999999999 bytes" <<<"$out" || fail "capacity check: $out"
