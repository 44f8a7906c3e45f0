#!/usr/bin/env bash
# appbox run: a shell program sees the sandbox through HOME, XDG_* and TMPDIR; its exit
# status (128+N for a signal) is the run's; the run's mount is gone afterwards.
source "$(dirname "$0")/../lib.sh"

make_temp_dir dir
mkdir "$dir/backing"
out=$("$APPBOX" run --backing "$dir/backing" -- sh -c '
  echo "$HOME|$XDG_DATA_HOME|$XDG_CACHE_HOME|$XDG_CONFIG_HOME|$TMPDIR" | sed "s#$APPBOX_CONTAINER#ROOT#g"
  echo kept > "$XDG_DATA_HOME/kept"; echo scratch > "$TMPDIR/scratch"')
assert_eq "ROOT|ROOT/Library/Application Support|ROOT/Library/Caches|ROOT/Library/Preferences|ROOT/tmp" "$out" "environment"
assert_eq kept "$(cat "$dir/backing/Library/Application Support/kept")" "Application Support in the backing"
assert_eq scratch "$(cat "$dir/backing/tmp/scratch")" "tmp in the backing"
grep -q " $dir/" /proc/self/mounts && fail "a mount of the run is left"
grep -q "appbox-run-" /proc/self/mounts && fail "the run's temporary mount is left"

assert_exit 3 "$APPBOX" run -- sh -c 'exit 3'
assert_exit 143 "$APPBOX" run -- sh -c 'kill -TERM $$'
assert_exit 127 "$APPBOX" run -- appbox-no-such-program
assert_exit 64 "$APPBOX" run sh -c true

# An existing mount is reused and stays mounted.
mount_sandbox --unlocked
assert_eq "$MNT" "$("$APPBOX" run "$MNT" -- sh -c 'echo "$HOME"')" "reused mount's root"
is_mounted "$MNT" || fail "appbox run unmounted a mount it did not make"
