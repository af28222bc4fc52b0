# The chaos image: the one binary and the shipped scenarios, profiles and policies, for
# `chaos k8s render` (deploy/k8s/README.md) and for running anywhere else.
#
#   docker build -t REGISTRY/chaos:0.1.0 . && docker push REGISTRY/chaos:0.1.0
#
# Stage 1 builds a release binary with the locked dependencies; stage 2 is a small Debian
# runtime with only the binary, CA certificates and a non-root user (uid 10001, the uid the
# rendered pods run as, read-only root file system).

FROM rust:1.95-slim-trixie AS build
WORKDIR /src
# Dependencies first, so a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src && echo 'fn main() {}' > src/main.rs && echo '' > src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src target/release/deps/chaos-* target/release/deps/libchaos-* target/release/chaos*
COPY src ./src
COPY gateway ./gateway
COPY assets ./assets
RUN cargo build --release --locked && strip target/release/chaos

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 chaos \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin chaos
COPY --from=build /src/target/release/chaos /usr/local/bin/chaos
COPY scenarios /opt/chaos/scenarios
COPY mock-upstreams /opt/chaos/mock-upstreams
COPY gateway /opt/chaos/gateway
WORKDIR /opt/chaos
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/chaos"]
CMD ["--help"]
