#!/usr/bin/env bash
# Yields a real Kubernetes control plane for the tests, the benchmarks and `arcflow dev --kube
# apiserver`: a folder holding kube-apiserver, kube-controller-manager and etcd. Prints that
# folder's path as its last line of stdout (progress goes to stderr).
#
#   1. KUBEBUILDER_ASSETS set (envtest's convention, e.g. from setup-envtest): that folder is used
#      as it is and nothing is built. It must hold kube-apiserver and etcd; kube-controller-manager
#      is used when it is there too.
#   2. Else the binaries are built with `go build` from the Go module proxy, from the wrapper
#      module in compat/control-plane (its go.mod pins the release), into
#      .cache/control-plane/<version>-<key>/ (gitignored). The key hashes the wrapper's files, so
#      a new pin builds anew and an unchanged one is reused. Go's own build cache makes a rebuild
#      in a fresh clone on the same machine take about a minute instead of five.
#   3. Neither Go nor assets: one line saying how to get them, exit 1. Nothing is skipped silently.
#
# docs/control-plane.md says why it is built this way (Go version, module wrapping, flags).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SRC="$ROOT/compat/control-plane"
# The pinned release: the version of k8s.io/kubernetes in the wrapper's go.mod.
VERSION="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$SRC/go.mod")"
[ -n "$VERSION" ] || { echo "control-plane: no k8s.io/kubernetes version in $SRC/go.mod" >&2; exit 1; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  for bin in kube-apiserver etcd; do
    if [ ! -x "$KUBEBUILDER_ASSETS/$bin" ]; then
      echo "control-plane: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no executable $bin" >&2
      exit 1
    fi
  done
  echo "control-plane: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

KEY="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/etcd/main.go" | sha256sum | cut -c1-12)"
OUT="${ARCFLOW_CACHE_DIR:-$ROOT/.cache}/control-plane/$VERSION-$KEY"
if [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/kube-controller-manager" ] && [ -x "$OUT/etcd" ]; then
  echo "$OUT"
  exit 0
fi

if [ "${ARCFLOW_CONTROL_PLANE_NO_BUILD:-0}" = "1" ]; then
  echo "control-plane: $VERSION is not built yet: run scripts/control-plane.sh (or scripts/install-tools.sh)" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "control-plane: no Go toolchain and no KUBEBUILDER_ASSETS: install Go 1.26 (the module proxy must be reachable) or point KUBEBUILDER_ASSETS at a folder with kube-apiserver, etcd and kube-controller-manager" >&2
  exit 1
fi
# Go 1.27 turns on the jsonv2 experiment, with which kube-apiserver serves broken OpenAPI
# documents; build with the local 1.26 toolchain and never download another.
export GOTOOLCHAIN=local CGO_ENABLED=0
GO_VERSION="$(go env GOVERSION)"
case "$GO_VERSION" in
  go1.26*) ;;
  *) echo "control-plane: need Go 1.26 (found $GO_VERSION): Go 1.27's jsonv2 default breaks kube-apiserver's OpenAPI" >&2; exit 1 ;;
esac

MINOR="$(echo "$VERSION" | cut -d. -f2)"
VPKG=k8s.io/component-base/version
LDFLAGS="-s -w -X $VPKG.gitVersion=$VERSION -X $VPKG.gitMajor=1 -X $VPKG.gitMinor=$MINOR -X $VPKG.gitTreeState=clean"
TMP="$OUT.tmp.$$"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
echo "control-plane: building kube-apiserver, kube-controller-manager and etcd $VERSION with $GO_VERSION (about 5 min from a cold cache on 2 cores) ..." >&2
start=$(date +%s)
(
  cd "$SRC"
  go build -trimpath -ldflags "$LDFLAGS" -o "$TMP/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  go build -trimpath -ldflags "-s -w" -o "$TMP/etcd" ./etcd
)
"$TMP/kube-apiserver" --version >&2
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "control-plane: built in $(( $(date +%s) - start )) s into $OUT" >&2
echo "$OUT"
