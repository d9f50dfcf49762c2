#!/usr/bin/env bash
# Builds arcflow's four images (watcher, registrar, reconciler, listener), docker-compose.yml's
# devstack image and the node's runner image from this checkout on a machine without a Docker
# engine and without a reachable container registry (docs/images.md, ADR 0058):
#   1. a Debian bookworm base with Python 3.11, made with debootstrap from Debian's packages and
#      cached in .cache/images/, imported as the local image localhost/arcflow/python:3.11-bookworm;
#   2. an image holding uv at the release the Dockerfile names (uv's own PyPI package);
#   3. deploy/docker/Dockerfile built with buildah, one target per image, with those two images
#      passed as the PYTHON_IMAGE and UV_IMAGE build args: the same file docker users build. In
#      Docker's image format, which is what podman's Docker API builds, so that `docker compose
#      up --build` on podman finds every step in this build's layer cache (ADR 0076);
#   4. scripts/compose-images.sh: the images docker-compose.yml and the Dockerfile name
#      (nats:2.10-alpine, the two bases under their default names) and the CNI plugin that
#      resolves compose service names, for scripts/compose-podman.sh.
# Each chart image is tagged <repository from the chart's values.yaml>:<chart appVersion> (what a
# chart install pulls) and localhost/arcflow/<name>:<appVersion>; the devstack image (no chart)
# localhost/arcflow/devstack:<appVersion>, the runner image (the Dockerfile's `runner` target, a
# runner of our own against the Actions simulator: ADR 0091) localhost/arcflow/runner:<appVersion>.
# Only the four chart images' names are printed.
#
#   scripts/build-images.sh            # builds what is missing or out of date; prints the names
#   scripts/build-images.sh --force    # runs every build (buildah's layer cache still applies)
#   scripts/build-images.sh --print    # prints the image names, one a line, and builds nothing
#
# Nothing changed since the last build (the files that go into the images, this script, the
# charts' names; all four images present): it prints the names and returns in about a second.
# Otherwise buildah's layer cache reuses every step whose input is unchanged.
#
# Needs root (debootstrap, buildah's storage in /var/lib/containers). Installs buildah, podman,
# runc and debootstrap with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE="$ROOT/.cache/images"
DOCKERFILE=deploy/docker/Dockerfile
SUITE=bookworm
# python3 brings python3.11 and its standard library; ca-certificates as in the python slim images.
BASE_PACKAGES=python3,ca-certificates
BASE_IMAGE=localhost/arcflow/python:3.11-$SUITE
# The Debian mirror: ARCFLOW_DEBIAN_MIRROR, else the one apt on this machine uses for $SUITE, else
# debootstrap's default.
apt_mirror() {
  { awk -v suite="$SUITE" '/^URIs:/{u=$2} /^Suites:/{for(i=2;i<=NF;i++) if($i==suite) print u}' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null
    awk -v suite="$SUITE" '$1=="deb" && $0 !~ /\[/ && $3==suite {print $2}' /etc/apt/sources.list 2>/dev/null
  } | head -1
}
MIRROR=${ARCFLOW_DEBIAN_MIRROR:-$(apt_mirror || true)}

log() { echo "== build-images: $*" >&2; }

# --- what the charts reference -------------------------------------------------------------------
APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' deploy/helm/arcflow-watcher/Chart.yaml)
# The `repository:` under `image:` at the top of a values file (the service's own image).
repository() { awk '/^image:/{f=1;next} f&&/^[^ ]/{f=0} f&&/^  repository:/{print $2; exit}' "$1"; }
# The listener's image: `listener.image.repository` in the reconciler chart.
listener_repository() {
  awk '/^listener:/{f=1;next} f&&/^[^ ]/{f=0} f&&/^  image:/{g=1;next} g&&/^    repository:/{print $2; exit}' \
    deploy/helm/arcflow-reconciler/values.yaml
}
declare -A REPO=(
  [watcher]=$(repository deploy/helm/arcflow-watcher/values.yaml)
  [registrar]=$(repository deploy/helm/arcflow-registrar/values.yaml)
  [reconciler]=$(repository deploy/helm/arcflow-reconciler/values.yaml)
  [listener]=$(listener_repository)
)
NAMES=(watcher registrar reconciler listener)
# Built too, not printed: docker-compose.yml's emulator, simulator, pod runner and demo image,
# and the runner image runner pods on the node run (ADR 0091; no package: the Python base and one
# program).
REPO[devstack]=localhost/arcflow/devstack
REPO[runner]=localhost/arcflow/runner
BUILDS=("${NAMES[@]}" devstack runner)
declare -A PACKAGE=([devstack]=arcflow-cli)
for name in "${NAMES[@]}"; do
  [ -n "${REPO[$name]}" ] || { echo "build-images: no image repository for $name in the charts" >&2; exit 1; }
done
[ -n "$APP_VERSION" ] || { echo "build-images: no appVersion in deploy/helm/arcflow-watcher/Chart.yaml" >&2; exit 1; }

if [ "${1:-}" = "--print" ]; then
  for name in "${NAMES[@]}"; do echo "${REPO[$name]}:$APP_VERSION"; done
  exit 0
fi

# --- unchanged since the last build? ---------------------------------------------------------------
STAMP="$CACHE/inputs.sha256"
inputs_digest() {
  git ls-files -z --cached --others --exclude-standard -- pyproject.toml uv.lock README.md \
      .dockerignore deploy/docker libs services scripts/build-images.sh \
      'deploy/helm/*/Chart.yaml' 'deploy/helm/*/values.yaml' 2>/dev/null \
    | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}
DIGEST=$(inputs_digest || true)
if [ "${1:-}" != "--force" ] && [ -n "$DIGEST" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$DIGEST" ] \
    && command -v buildah >/dev/null 2>&1; then
  present=1
  for name in "${BUILDS[@]}"; do
    buildah inspect --type image "${REPO[$name]}:$APP_VERSION" >/dev/null 2>&1 || { present=0; break; }
  done
  if [ "$present" = 1 ]; then
    log "unchanged since the last build ($STAMP)"
    bash scripts/compose-images.sh
    for name in "${NAMES[@]}"; do echo "${REPO[$name]}:$APP_VERSION"; done
    exit 0
  fi
fi

# --- tools ---------------------------------------------------------------------------------------
missing=()
for tool in buildah:buildah podman:podman runc:runc debootstrap:debootstrap; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
mkdir -p "$CACHE"

# RUN steps: chroot isolation (no OCI runtime, no cgroups: this sandbox's crun refuses its hybrid
# cgroup layout) and the host's network, so uv reaches the package index.
# Docker's image format: podman's Docker API builds it, and buildah's layer cache matches a step
# only in the same format.
BUILD_FLAGS=(--isolation chroot --network host --layers --format docker)
# uv inside RUN steps trusts the host's CA bundle (mounted for the build only, never a layer):
# machines whose egress re-signs TLS need it; elsewhere it is the usual system bundle.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  printf 'native-tls = true\n' >"$CACHE/uv.toml"
  BUILD_FLAGS+=(--volume "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro"
                --volume "$CACHE/uv.toml:/etc/uv/uv.toml:ro")
fi

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# --- 1. the base: Debian bookworm + Python 3.11 from debootstrap ----------------------------------
if ! image_exists "$BASE_IMAGE"; then
  tarball="$CACHE/base-$SUITE-${BASE_PACKAGES//,/-}.tar"
  if [ ! -f "$tarball" ]; then
    rootfs="$CACHE/rootfs-$SUITE"
    rm -rf "$rootfs"
    log "debootstrap $SUITE (minbase + $BASE_PACKAGES) into $rootfs"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" ${MIRROR:+"$MIRROR"} \
      >"$CACHE/debootstrap.log" 2>&1 || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    # What the python slim images leave out too: downloaded packages and the package lists.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
      "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
    tar --numeric-owner --xattrs -C "$rootfs" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
  fi
  log "importing $tarball as $BASE_IMAGE"
  podman import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' "$tarball" "$BASE_IMAGE" >/dev/null
fi

# --- 2. uv, at the Dockerfile's release ----------------------------------------------------------
UV_VERSION=$(sed -n 's|^ARG UV_IMAGE=.*uv:\([0-9.]*\)$|\1|p' "$DOCKERFILE")
[ -n "$UV_VERSION" ] || { echo "build-images: no uv release in $DOCKERFILE (ARG UV_IMAGE)" >&2; exit 1; }
UV_IMAGE=localhost/arcflow/uv:$UV_VERSION
if ! image_exists "$UV_IMAGE"; then
  uvdir="$CACHE/uv-$UV_VERSION"
  if [ ! -x "$uvdir/bin/uv" ]; then
    log "uv $UV_VERSION from its Python package"
    rm -rf "$uvdir"
    python3 -m pip install --quiet --no-deps --target "$uvdir" "uv==$UV_VERSION"
  fi
  # Like uv's own image: a scratch image with /uv and /uvx.
  ctr=$(buildah from scratch)
  buildah copy --chmod 0755 "$ctr" "$uvdir/bin/uv" "$uvdir/bin/uvx" / >/dev/null
  buildah commit --quiet --rm "$ctr" "$UV_IMAGE" >/dev/null
fi

# --- 3. the images, from the Dockerfile ------------------------------------------------------------
for name in "${BUILDS[@]}"; do
  package=${PACKAGE[$name]:-arcflow-$name}
  tags=(--tag "${REPO[$name]}:$APP_VERSION")
  [ "${REPO[$name]}" = "localhost/arcflow/$name" ] || tags+=(--tag "localhost/arcflow/$name:$APP_VERSION")
  log "$name: buildah build --target $name (PACKAGE=$package)"
  buildah build "${BUILD_FLAGS[@]}" -f "$DOCKERFILE" --target "$name" \
    --build-arg "PACKAGE=$package" \
    --build-arg "PYTHON_IMAGE=$BASE_IMAGE" \
    --build-arg "UV_IMAGE=$UV_IMAGE" \
    "${tags[@]}" . >"$CACHE/build-$name.log" 2>&1 || { tail -30 "$CACHE/build-$name.log" >&2; exit 1; }
  case $name in devstack|runner) ;; *) echo "${REPO[$name]}:$APP_VERSION" ;; esac
done
# --- 4. what docker compose on podman needs besides ------------------------------------------------
bash scripts/compose-images.sh
# buildah 1.28 leaves the working container of a stage that is only a FROM (the uv stage) behind.
buildah containers --filter "ancestor=$UV_IMAGE" --format '{{.ContainerName}}' \
  | grep '^uv-working-container' | xargs -r buildah rm >/dev/null || true
[ -z "$DIGEST" ] || echo "$DIGEST" >"$STAMP"
