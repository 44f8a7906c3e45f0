# Sourced by benchmark scripts: a scratch directory removed on exit, and in it a fresh
# ext4 filesystem in an image file, loop-mounted with direct I/O, so that no measurement
# runs on a filesystem aged by earlier work (this VM's root filesystem is mounted with
# `discard`, which makes deletes many times slower).

# scratch DIR NAME: makes the scratch directory (sets SCRATCH) and the exit traps, which
# unmount every mountpoint listed in SCRATCH_MOUNTS (with `$binary unmount`, else
# fusermount3), then the ext4 filesystem, and remove the directory.
scratch() {
  SCRATCH=$(mktemp -d "$1/$2.XXXXXX")
  SCRATCH_MOUNTS=()
  trap scratch_remove EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

scratch_remove() {
  for m in "${SCRATCH_MOUNTS[@]}"; do "$binary" unmount "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true; done
  [ -n "${FRESH_DIR:-}" ] && umount "$FRESH_DIR" 2>/dev/null || true
  [ -n "${FRESH_LOOP:-}" ] && losetup -d "$FRESH_LOOP" 2>/dev/null || true
  rm -rf "$SCRATCH"
}

# fresh_ext4 SIZE DIR [MKFS OPTIONS...]: makes the filesystem in the scratch directory
# (mkfs.ext4 with the options given, e.g. -i 4096 for more inodes) and mounts it on DIR
# (sets FRESH_LOOP, the loop device).
fresh_ext4() {
  truncate -s "$1" "$SCRATCH/fs.img"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${@:3}" "$SCRATCH/fs.img"
  FRESH_LOOP=$(losetup --find --show --direct-io=on "$SCRATCH/fs.img")
  mkdir -p "$2"
  mount "$FRESH_LOOP" "$2"
  FRESH_DIR=$2
}
