#!/bin/sh
# Build jetrelay's image with podman, without pulling anything: a static
# binary (CGO_ENABLED=0), the host's CA bundle and a passwd entry go into a
# FROM scratch image (deploy/image/Containerfile).
#
#   deploy/image/build.sh [TAG]        default TAG: localhost/jetrelay:dev
#
# Environment: GO (the go command, default: go on PATH), VERSION (default:
# git describe), PODMAN (default: podman).
set -eu
tag=${1:-localhost/jetrelay:dev}
root=$(cd "$(dirname "$0")/../.." && pwd)
go=${GO:-go}
podman=${PODMAN:-podman}
version=${VERSION:-$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)}
ca=/etc/ssl/certs/ca-certificates.crt
[ -r "$ca" ] || { echo "build.sh: $ca not found (Debian: apt-get install ca-certificates)" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/etc/ssl/certs" "$ctx/data"
cp "$ca" "$ctx/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\njetrelay:x:65532:65532:jetrelay:/data:/sbin/nologin\n' >"$ctx/etc/passwd"
printf 'root:x:0:\njetrelay:x:65532:\n' >"$ctx/etc/group"
(cd "$root" && CGO_ENABLED=0 "$go" build -trimpath \
	-ldflags "-s -w -X github.com/jetrelay/jetrelay/cmd.version=$version" \
	-o "$ctx/jetrelay" ./cmd/jetrelay)
# --format docker keeps the HEALTHCHECK (the OCI format has no such field).
"$podman" build --quiet --format docker -f "$root/deploy/image/Containerfile" -t "$tag" "$ctx"
