#!/bin/sh
# Build a FROM scratch nats-server image (deploy/image/Containerfile.nats)
# from the nats-server module version in jetrelay's go.mod, with podman.
#
#   deploy/image/build-nats.sh [TAG]   default TAG: localhost/jetrelay-nats:dev
set -eu
tag=${1:-localhost/jetrelay-nats:dev}
root=$(cd "$(dirname "$0")/../.." && pwd)
go=${GO:-go}
podman=${PODMAN:-podman}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/etc" "$ctx/data"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnats:x:65532:65532:nats:/data:/sbin/nologin\n' >"$ctx/etc/passwd"
printf 'root:x:0:\nnats:x:65532:\n' >"$ctx/etc/group"
(cd "$root" && CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$ctx/nats-server" github.com/nats-io/nats-server/v2)
"$podman" build --quiet --format docker -f "$root/deploy/image/Containerfile.nats" -t "$tag" "$ctx"
