# personad as a container image (Kubernetes: deploy/kubernetes/, docs/scaling.md).
#
#   docker build -t personad:dev .
#   docker build --build-arg VOICE_PACKAGES= -t personad:dev-novoice .   # no local speech engine
#
# The build stage runs the commands .ci/run uses on a fresh Debian machine: the system Opus
# library with its development files (libopus-dev; opusic-c links it, no cmake, no bindgen),
# then `cargo build --locked` (here with --release). The toolchain image is pinned to the Rust
# release CI builds with (Cargo.toml's rust-version).
#
# The runtime stage is Debian slim with what the binary needs at run time: libopus0 (voice
# notes' codec), ca-certificates (rustls verifies the LLM providers' certificates against
# the system roots), and espeak-ng, the local speech engine of personas that speak (leave it
# out with VOICE_PACKAGES=; personas with a `# Voice` then need another engine, docs/voice.md).
#
# Read-only root filesystem friendly: the daemon writes only its state directory
# (/var/lib/personad/state, on the volume mounted at /var/lib/personad: the daemon makes it,
# 0700 and its own, which it cannot do to a volume's root that Kubernetes owns) and, at most,
# TMPDIR (/tmp, an emptyDir in Kubernetes); HOME is the volume. The image runs as a fixed non-root UID/GID (10001), which the
# Kubernetes manifests name in runAsUser/fsGroup.

ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
# A C compiler comes with the image; libopus-dev is the one library .ci/run installs for the
# daemon's build (g++ and chromium there are for the fuzz targets and the browser tests).
# Packages are not pinned to exact Debian versions (DL3008): the release's security updates
# replace them in the archive, and a pin would break the build instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libopus-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
    && install -D -m 0755 target/release/personad /out/personad

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
ARG VOICE_PACKAGES=espeak-ng
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates libopus0 ${VOICE_PACKAGES} \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 personad \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/personad \
        --no-create-home --shell /usr/sbin/nologin personad \
    && install -d -m 0700 -o 10001 -g 10001 /var/lib/personad
COPY --from=build /out/personad /usr/local/bin/personad
# The role prompts ship with the binary; persona files come from a volume (a ConfigMap).
COPY prompts/ /usr/local/share/personad/prompts/
ENV PERSONAD_STATE_DIR=/var/lib/personad/state \
    PERSONAD_AGENTS_DIR=/etc/personad/agents \
    PERSONAD_PROMPTS_PATH=/usr/local/share/personad/prompts \
    HOME=/var/lib/personad \
    TMPDIR=/tmp
USER 10001:10001
WORKDIR /var/lib/personad
VOLUME ["/var/lib/personad"]
# 9464: /metrics and /healthz, served only with --metrics-addr (the manifests set it).
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/personad"]
CMD ["run"]
