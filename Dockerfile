# The presenced image, for a machine that can pull golang:1.26-bookworm:
#
#   docker build -t presenced:0.9.0 \
#     --build-arg VERSION=$(cat VERSION) --build-arg REVISION=$(git rev-parse HEAD) .
#
# (podman and buildah build it the same way). `make image` builds the same
# image with buildah without pulling anything: it replaces the build stage by
# the binary `make build` made here (deploy/image/build.sh), and the final
# stage below is used as it is. See docs/deployment.md.
#
# The image is FROM scratch: the static binary, /etc/presenced/presenced.yaml
# (configs/presenced.yaml: every key at its default), CA roots, and the user
# presenced (65532:65532). Configure it with PRESENCED_* variables, or mount
# a file over /etc/presenced/presenced.yaml. Without an authentication method
# presenced holds MQTT to loopback (nothing outside the container reaches
# it): mount a password file (PRESENCED_AUTH_PASSWORD_FILE) or a JWT key, or,
# to try it out, set PRESENCED_AUTH_ALLOW_ANONYMOUS=true. The admin port
# listens on 127.0.0.1:8080 inside the container (the health check asks it);
# PRESENCED_ADMIN_ADDR=:8080 opens it, and then needs PRESENCED_ADMIN_TOKEN
# or PRESENCED_ADMIN_TOKEN_FILE.

# VERSION must equal the VERSION file (a test checks it); REVISION is the
# git commit (the context leaves .git out); CREATED its time, RFC 3339.
ARG VERSION=0.9.0
ARG REVISION=unknown
ARG CREATED=

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
ARG REVISION
ARG CREATED
RUN make build VERSION="$VERSION" REVISION="$REVISION" REVISION_TIME="$CREATED" MODIFIED=false \
	&& deploy/image/rootfs.sh /out/rootfs bin/presenced

FROM scratch
ARG VERSION
ARG REVISION
COPY --from=build /out/rootfs/ /
USER 65532:65532
ENV PRESENCED_CONFIG=/etc/presenced/presenced.yaml
# MQTT over TCP, MQTT over WebSocket, admin (metrics, health, API).
EXPOSE 1883/tcp 1882/tcp 8080/tcp
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
	CMD ["/usr/local/bin/presenced", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/presenced"]
LABEL org.opencontainers.image.title="presenced" \
	org.opencontainers.image.description="MQTT broker (mochi-mqtt) with presence" \
	org.opencontainers.image.version="$VERSION" \
	org.opencontainers.image.revision="$REVISION" \
	org.opencontainers.image.licenses="MIT" \
	org.opencontainers.image.source="https://github.com/presenced/presenced"
