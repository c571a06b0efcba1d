#!/bin/sh
# build.sh: builds the presenced image with buildah from the repository's
# Dockerfile without pulling anything, and stores it in the local
# containers storage as localhost/presenced:VERSION (make image runs it).
#
# The Dockerfile's build stage (golang image, make build) is replaced by a
# directory (buildah build --build-context build=DIR): the binary make build
# has built here, laid out by rootfs.sh as that stage lays it out. The final
# stage, the one that defines the image (user, ports, configuration, health
# check, labels, entry point), is the Dockerfile's own: the image built here
# and one built with docker from the Dockerfile cannot drift apart.
#
# Format docker, since an OCI image configuration has no HEALTHCHECK. The
# image's time stamps are the commit's time (--timestamp), so one commit
# builds the same image. The image the tag named before is removed when
# nothing else uses it, so repeated builds do not pile up.
#
# Environment: BINARY (a static build, e.g. bin/presenced), VERSION, IMAGE
# (the name; default localhost/presenced:VERSION),
# REVISION, CREATED (the commit time, RFC 3339), EPOCH (the same in seconds;
# empty: now), ARCHIVE (optional: also write the image there as a
# docker-archive, which `docker load` and `podman load` read).
set -eu
: "${BINARY:?}" "${VERSION:?}" "${REVISION:=unknown}" "${CREATED:=}" "${EPOCH:=}" "${ARCHIVE:=}"
image=${IMAGE:-localhost/presenced:$VERSION}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deploy/image/rootfs.sh "$tmp/out/rootfs" "$BINARY"

old=$(buildah images --quiet --no-trunc "$image" 2>/dev/null || true)
set -- --pull=never --format docker --layers=false \
	--build-context "build=$tmp" \
	--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
	--file Dockerfile --tag "$image"
if [ -n "$EPOCH" ]; then
	set -- "$@" --timestamp "$EPOCH"
fi
buildah build --quiet "$@" . >/dev/null
new=$(buildah images --quiet --no-trunc "$image")
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	buildah rmi "$old" >/dev/null 2>&1 || true
fi
if [ -n "$ARCHIVE" ]; then
	rm -f "$ARCHIVE"
	buildah push --quiet "$image" "docker-archive:$ARCHIVE:$image"
fi
echo "$image $new"
