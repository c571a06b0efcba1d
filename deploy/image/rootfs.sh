#!/bin/sh
# rootfs.sh OUT BINARY: lays out in OUT the whole file system of the
# presenced image (it is FROM scratch): the static binary, the configuration
# (configs/presenced.yaml, every key at its default), the CA roots for Redis
# over TLS with the system's roots, and /etc/passwd and /etc/group naming the
# user the image runs as, presenced (65532:65532). Every file belongs to
# root, so that user can change none of them. The image has no shell, no
# /tmp and no data directory: presenced writes no files (the Redis store
# keeps its state; the memory store keeps it in memory).
#
# The Dockerfile's build stage and deploy/image/build.sh (make image) both
# run it, so the two images hold the same files. Run from the repository's
# root.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 OUT BINARY" >&2
	exit 2
fi
out=$1 bin=$2
certs=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$certs" ]; then
	echo "$0: $certs is missing (apt-get install ca-certificates)" >&2
	exit 1
fi
mkdir -p "$out/usr/local/bin" "$out/etc/presenced" "$out/etc/ssl/certs"
cp "$bin" "$out/usr/local/bin/presenced"
chmod 0755 "$out/usr/local/bin/presenced"
cp configs/presenced.yaml "$out/etc/presenced/presenced.yaml"
cp "$certs" "$out/etc/ssl/certs/ca-certificates.crt"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
	'presenced:x:65532:65532:presenced:/nonexistent:/sbin/nologin' >"$out/etc/passwd"
printf '%s\n' 'root:x:0:' 'presenced:x:65532:' >"$out/etc/group"
chmod 0644 "$out/etc/presenced/presenced.yaml" "$out/etc/ssl/certs/ca-certificates.crt" "$out/etc/passwd" "$out/etc/group"
