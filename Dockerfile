# AppBox in a container, running the end-to-end suite (Integration/) against a real mount.
#
#   docker build -t appbox-integration .
#   docker run --rm --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
#     appbox-integration
#
# The base images are build arguments so the file builds from the official images
# (the defaults) or from local ones (Integration/docker/make-local-base-images.sh).
ARG BUILDER_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libfuse3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources/ Sources/
COPY bench/purge-catalog/ bench/purge-catalog/
# The manifest names test targets whose sources are not needed here: empty directories
# satisfy it (SwiftPM warns and goes on).
RUN mkdir -p $(sed -n 's|.*testTarget(name: "\([^"]*\)".*|Tests/\1|p' Package.swift) \
 && swift build -c release --product appbox --static-swift-stdlib \
 && install -m 0755 "$(swift build -c release --show-bin-path)/appbox" /usr/local/bin/appbox

FROM ${RUNTIME_IMAGE}
# fuse3 brings libfuse3 and fusermount3; attr, python3 and sqlite3 are what the tests use.
RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 attr python3 sqlite3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/appbox /usr/local/bin/appbox
COPY Integration/ /opt/appbox/Integration/
CMD ["/opt/appbox/Integration/run.sh", "--binary", "/usr/local/bin/appbox"]
