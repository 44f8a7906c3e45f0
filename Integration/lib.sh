# Shared helpers for the integration tests; every Integration/tests/test_*.sh sources this.
#
# A test gets APPBOX (the binary under test) from run.sh, makes its directories with
# make_temp_dir, mounts with mount_sandbox, and asserts with assert_eq, assert_exit and
# wait_until. On exit, whatever it mounted is unmounted and its directories are removed.
# Nothing is ever killed by name; the daemons end when their mounts go away.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/asserts.sh"

APPBOX="${APPBOX:?run the tests through Integration/run.sh, which sets APPBOX}"

_cleanup_mounts=()
_cleanup_dirs=()

# make_temp_dir VAR: makes a directory that is removed when the test ends, and stores
# its path in the variable VAR (no command substitution, so the registration sticks).
make_temp_dir() {
  local _made
  _made=$(mktemp -d "${TMPDIR:-/tmp}/appbox-it.XXXXXX")
  _cleanup_dirs+=("$_made")
  printf -v "$1" '%s' "$_made"
}

# is_mounted PATH: whether PATH is a mountpoint.
is_mounted() {
  mountpoint -q "$1"
}

# mount_sandbox [MOUNT OPTIONS...]: mounts a fresh sandbox and sets MNT and BACKING.
# The mountpoint and the backing directory live in a new temp directory, TEST_DIR.
mount_sandbox() {
  make_temp_dir TEST_DIR
  BACKING="$TEST_DIR/backing"
  MNT="$TEST_DIR/mnt"
  mkdir "$BACKING" "$MNT"
  "$APPBOX" mount --backing "$BACKING" "$MNT" "$@" || fail "appbox mount $* exited $?"
  _cleanup_mounts+=("$MNT")
  is_mounted "$MNT" || fail "$MNT is not mounted after appbox mount returned"
}

# unmount_sandbox [MOUNTPOINT]: unmounts (default: $MNT) through the CLI.
unmount_sandbox() {
  local target="${1:-$MNT}"
  "$APPBOX" unmount "$target" || fail "appbox unmount $target exited $?"
  is_mounted "$target" && fail "$target is still mounted after appbox unmount"
  return 0
}

_cleanup() {
  local status=$?
  set +e
  local target
  for target in "${_cleanup_mounts[@]}"; do
    if is_mounted "$target"; then
      "$APPBOX" unmount "$target" >/dev/null 2>&1 || fusermount3 -uz "$target" >/dev/null 2>&1
    fi
  done
  local dir
  for dir in "${_cleanup_dirs[@]}"; do
    # Never follow a mount that could not be removed into its backing data.
    if ! grep -qF " $dir/" /proc/self/mounts; then rm -rf "$dir"; fi
  done
  exit "$status"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# xattr MOUNTPATH NAME: prints an extended attribute's value as text.
xattr() {
  getfattr --absolute-names --only-values -n "$2" "$1"
}

# xattr_hex PATH NAME: prints an extended attribute's value in hex (0x01).
xattr_hex() {
  getfattr --absolute-names -e hex -n "$2" "$1" | sed -n "s/^$2=//p"
}

# count_files DIR: prints how many regular files are below DIR.
count_files() {
  find "$1" -type f | wc -l
}
