# AppBox as a container image: a tool that runs a command in a fresh sandbox, a sidecar
# that serves a sandbox to other containers, and (its default command) AppBox's own
# end-to-end suite (Integration/).
#
#   docker build -t appbox .
#   docker run --rm --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
#     appbox                                   # the suite
#   docker run --rm --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
#     appbox appbox run -- sh -c 'ls "$HOME"'  # a command in a fresh sandbox
#
# Why each flag, the user it runs as and the sidecar: Integration/README.md.
# The build stage also builds the example programs in Examples/
# (/usr/local/bin/appbox-example-*): `docker build --target build -t appbox-build .`
# keeps them for Examples/Dockerfile, an image FROM this one that tests two of them.
#
# The base images are build arguments so the file builds from the official images
# (the defaults) or from local ones (Integration/docker/make-local-base-images.sh).
ARG BUILDER_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libfuse3-dev liburing-dev libsqlite3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources/ Sources/
COPY Examples/ Examples/
# Every target path Package.swift names must be here, the benchmarks' too.
COPY bench/purge-catalog/ bench/purge-catalog/
COPY bench/event-encoding/ bench/event-encoding/
# The manifest names the test targets too: their sources must be there (nothing of them
# is built).
COPY Tests/ Tests/
RUN swift build -c release --static-swift-stdlib --product appbox \
 && swift build -c release --static-swift-stdlib --product appbox-example-document-store \
 && swift build -c release --static-swift-stdlib --product appbox-example-protected-secret \
 && bin="$(swift build -c release --show-bin-path)" \
 && install -m 0755 "$bin/appbox" "$bin/appbox-example-document-store" "$bin/appbox-example-protected-secret" \
      /usr/local/bin/

FROM ${RUNTIME_IMAGE}
# fuse3 brings libfuse3 and fusermount3 (setuid root); liburing2 is FUSE over io_uring's;
# libsqlite3 is for backups; attr,
# python3 and sqlite3 are what the tests use; tini is PID 1 (forwards signals, reaps).
# The user appbox (uid 1000) runs what the entrypoint starts; user_allow_other lets it
# mount with allow_other (a sidecar's mount, used by other containers' users and root).
# /backing and /shared are the sidecar's (Integration/README.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 liburing2 libsqlite3-0 attr python3 sqlite3 tini \
 && rm -rf /var/lib/apt/lists/* \
 && chmod u+s /usr/bin/fusermount3 \
 && sed -i 's/^#[[:space:]]*user_allow_other/user_allow_other/' /etc/fuse.conf \
 && grep -qx user_allow_other /etc/fuse.conf \
 && useradd --create-home --uid 1000 --user-group --shell /bin/bash appbox \
 && install -d -o appbox -g appbox /backing /shared
COPY --from=build /usr/local/bin/appbox /usr/local/bin/appbox
COPY Integration/ /opt/appbox/Integration/
COPY Integration/docker/entrypoint.sh /usr/local/bin/appbox-entrypoint
COPY Integration/docker/sidecar-entry.sh /usr/local/bin/appbox-sidecar
WORKDIR /home/appbox
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/appbox-entrypoint"]
CMD ["/opt/appbox/Integration/run.sh", "--binary", "/usr/local/bin/appbox"]
