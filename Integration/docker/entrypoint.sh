#!/bin/sh
# The image's entrypoint (run by tini): runs its arguments as the user `appbox`, not root.
#
# Started as root (the image's default), it first makes the container's own /dev/fuse
# node usable by that user (mode 0666, as udev makes it on a Debian host; the host's node
# is left as it is), then drops to `appbox` with setpriv: no capability stays in its
# sets, and mounting goes through fusermount3, setuid root, which can use the
# CAP_SYS_ADMIN that `--cap-add SYS_ADMIN` left in the bounding set.
# APPBOX_USER=root keeps root (the daemon then mounts itself and can use passthrough).
# Started as another user (docker run --user), it runs the arguments as that user.
set -eu
[ "$#" -gt 0 ] || set -- appbox --help
user=${APPBOX_USER:-appbox}
if [ "$(id -u)" != 0 ] || [ "$user" = root ]; then
  exec "$@"
fi
if [ -c /dev/fuse ]; then
  chmod 0666 /dev/fuse
fi
home=$(getent passwd "$user" | cut -d: -f6)
[ -n "$home" ] || { echo "appbox-entrypoint: no user $user in this image" >&2; exit 67; }
export HOME="$home" USER="$user" LOGNAME="$user"
exec setpriv --reuid "$user" --regid "$user" --init-groups -- "$@"
