#!/usr/bin/env bash
# Makes the Dockerfile's base images locally, for machines that reach a Debian mirror
# but no container registry:
#
#   local/bookworm         debootstrap --variant=minbase bookworm (the runtime base)
#   local/swift-bookworm   the same plus a Swift toolchain and what it needs (the builder)
#
#   Integration/docker/make-local-base-images.sh [--force]
#
# Needs root, debootstrap and a running Docker engine (DOCKER_HOST is honoured).
# The mirror is read from this machine's apt configuration at run time
# (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources);
# APPBOX_DEBIAN_MIRROR overrides it. The toolchain comes from SWIFT_TOOLCHAIN
# (default /opt/swift, whose usr/bin holds swift). Work files go to APPBOX_IMAGE_WORK
# (default /var/tmp/appbox-base-images) and are removed at the end.
set -euo pipefail

force=false
[[ "${1:-}" == "--force" ]] && force=true
suite=bookworm
toolchain="${SWIFT_TOOLCHAIN:-/opt/swift}"
work="${APPBOX_IMAGE_WORK:-/var/tmp/appbox-base-images}"

[[ $(id -u) == 0 ]] || { echo "make-local-base-images.sh: run as root (debootstrap, chroot)" >&2; exit 77; }
command -v debootstrap >/dev/null || { echo "install debootstrap (apt-get install debootstrap)" >&2; exit 69; }
docker info >/dev/null 2>&1 || { echo "no Docker engine answers (start dockerd, or set DOCKER_HOST)" >&2; exit 69; }
[[ -x "$toolchain/usr/bin/swift" ]] || { echo "no Swift toolchain at $toolchain (set SWIFT_TOOLCHAIN)" >&2; exit 66; }

# The first deb URI configured for the suite itself (not -security or -updates).
apt_mirror() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$file" ]] || continue
    awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$file" ]] || continue
    # deb822 stanzas: Types, URIs and Suites fields, separated by blank lines.
    awk -v suite="$suite" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uris != "") {
          split(uris, u, " "); print u[1]; exit
        }
        types = ""; uris = ""; suites = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^#/ { next }
      tolower($1) == "types:" { $1 = ""; types = $0; sub(/^ +/, "", types) }
      tolower($1) == "uris:" { $1 = ""; uris = $0; sub(/^ +/, "", uris) }
      tolower($1) == "suites:" { $1 = ""; suites = $0; sub(/^ +/, "", suites) }
      END { flush() }' "$file"
  done
}

mirror="${APPBOX_DEBIAN_MIRROR:-$(apt_mirror | head -n 1)}"
[[ -n "$mirror" ]] || { echo "no deb line for $suite in the apt configuration; set APPBOX_DEBIAN_MIRROR" >&2; exit 66; }
echo "mirror: $mirror"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

mkdir -p "$work"
cleanup() {
  local dir
  for dir in "$work/rootfs" "$work/rootfs-swift"; do
    # A chroot's /proc or /dev/pts must never be removed through.
    for sub in proc dev/pts; do mountpoint -q "$dir/$sub" 2>/dev/null && umount "$dir/$sub"; done
  done
  rm -rf "$work"
}
trap cleanup EXIT

# MARK: - local/bookworm

if $force || ! have_image local/bookworm || ! have_image local/swift-bookworm; then
  echo "debootstrap $suite into $work/rootfs"
  debootstrap --variant=minbase "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
fi

if $force || ! have_image local/bookworm; then
  tar -C "$work/rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - local/bookworm
fi

# MARK: - local/swift-bookworm

if $force || ! have_image local/swift-bookworm; then
  root="$work/rootfs-swift"
  cp -a "$work/rootfs" "$root"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no services in a chroot
  chmod +x "$root/usr/sbin/policy-rc.d"
  mount -t proc proc "$root/proc"
  # What the toolchain links against and runs (as in the official swift:bookworm image).
  chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c '
    apt-get update -q &&
    apt-get install -y -q --no-install-recommends \
      binutils gcc libc6-dev libstdc++-12-dev libgcc-12-dev git ca-certificates \
      libcurl4 libxml2 libedit2 libsqlite3-0 libncurses6 libpython3.11 libz3-4 \
      zlib1g-dev tzdata pkg-config &&
    apt-get clean && rm -rf /var/lib/apt/lists/*' >"$work/chroot-apt.log" 2>&1 \
    || { tail -n 20 "$work/chroot-apt.log" >&2; exit 1; }
  umount "$root/proc"
  rm -f "$root/usr/sbin/policy-rc.d"
  : >"$root/etc/resolv.conf"
  mkdir -p "$root/opt"
  cp -a "$toolchain" "$root/opt/swift"
  # The toolchain must find every library it links in the new root.
  missing=$(chroot "$root" sh -c 'ldd /opt/swift/usr/bin/swift-frontend /opt/swift/usr/bin/swift-build' | grep 'not found' || true)
  [[ -z "$missing" ]] || { echo "the toolchain misses libraries in the image:" >&2; echo "$missing" >&2; exit 1; }
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - local/swift-bookworm
fi

docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^local/'
