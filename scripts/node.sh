#!/usr/bin/env bash
# Yields the parts of a real Kubernetes node for the tests (docs/node.md): a folder holding
#   kubelet, kube-proxy, kube-scheduler   the control plane's release (compat/node/kubernetes)
#   containerd, containerd-shim-runc-v2, ctr                        (compat/node/containerd)
#   crictl                                                          (compat/node/cri-tools)
#   coredns                                                         (compat/node/coredns)
#   cni/bridge, cni/host-local, cni/loopback, cni/portmap           (compat/node/cni)
#   runc                                  a link to Debian's runc (installed with apt when root)
# Prints that folder's path as its last line of stdout; progress goes to stderr.
#
# Everything is built with `go build` from the Go module proxy, from wrapper modules of our own
# whose go.mod pins each release, into .cache/node/<kubernetes version>-<key>/ (gitignored). The
# key hashes the wrappers, so a new pin builds anew and an unchanged one is reused at once. No
# prebuilt binary is downloaded. When a part cannot be had: one line, exit 1.
#
# Run as root, it also installs with apt-get the Debian packages a node needs on the host when
# they are missing: runc, socat (the relay into the node's namespace), iptables (kube-proxy) and
# catatonit (the pause image).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SRC="$ROOT/compat/node"
VERSION="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$SRC/kubernetes/go.mod")"
[ -n "$VERSION" ] || { echo "node: no k8s.io/kubernetes version in $SRC/kubernetes/go.mod" >&2; exit 1; }

# The host's tools, from Debian (command, package).
TOOLS=(runc:runc socat:socat iptables:iptables catatonit:catatonit nsenter:util-linux)
missing=()
for tool in "${TOOLS[@]}"; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "node: installing ${missing[*]} with apt-get ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
for tool in "${TOOLS[@]}"; do
  command -v "${tool%%:*}" >/dev/null 2>&1 \
    || { echo "node: no ${tool%%:*} on PATH: install Debian's ${tool#*:} package" >&2; exit 1; }
done
RUNC="$(command -v runc)"

KEY="$(cat "$SRC"/*/go.mod "$SRC"/*/go.sum | sha256sum | cut -c1-12)"
OUT="${ARCFLOW_CACHE_DIR:-$ROOT/.cache}/node/$VERSION-$KEY"
PARTS=(kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr crictl coredns
  cni/bridge cni/host-local cni/loopback cni/portmap runc)
complete() {
  local part
  for part in "${PARTS[@]}"; do [ -x "$1/$part" ] || return 1; done
}
if complete "$OUT"; then
  echo "$OUT"
  exit 0
fi

if [ "${ARCFLOW_NODE_NO_BUILD:-0}" = "1" ]; then
  echo "node: $VERSION is not built yet: run scripts/node.sh" >&2
  exit 1
fi
command -v go >/dev/null 2>&1 || { echo "node: no Go toolchain: install Go 1.26 (the module proxy must be reachable)" >&2; exit 1; }
export GOTOOLCHAIN=local
GO_VERSION="$(go env GOVERSION)"
case "$GO_VERSION" in
  go1.26*) ;;
  *) echo "node: need Go 1.26 (found $GO_VERSION), the control plane's toolchain" >&2; exit 1 ;;
esac

TMP="$OUT.tmp.$$"
mkdir -p "$TMP/cni"
trap 'rm -rf "$TMP"' EXIT
MINOR="$(echo "$VERSION" | cut -d. -f2)"
VPKG=k8s.io/component-base/version
K8S_LDFLAGS="-s -w -X $VPKG.gitVersion=$VERSION -X $VPKG.gitMajor=1 -X $VPKG.gitMinor=$MINOR -X $VPKG.gitTreeState=clean"
# The version a part reports, from its wrapper's go.mod.
pin() { awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$SRC/$1/go.mod"; }
CONTAINERD_VERSION="$(pin containerd github.com/containerd/containerd/v2)"
CRICTL_VERSION="$(pin cri-tools sigs.k8s.io/cri-tools)"
CNI_VERSION="$(pin cni github.com/containernetworking/plugins)"
# build WRAPPER OUTDIR LDFLAGS PACKAGE...: static (CGO_ENABLED=0), trimmed, stripped.
build() {
  local wrapper="$1" dest="$2" ldflags="$3"
  shift 3
  (cd "$SRC/$wrapper" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dest/" "$@")
}
echo "node: building kubelet, kube-proxy, kube-scheduler $VERSION, containerd $CONTAINERD_VERSION, crictl $CRICTL_VERSION, CNI plugins $CNI_VERSION and CoreDNS with $GO_VERSION (about 10 min from a cold cache on 2 cores) ..." >&2
start=$(date +%s)
build kubernetes "$TMP" "$K8S_LDFLAGS" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
CPKG=github.com/containerd/containerd/v2
build containerd "$TMP" "-s -w -X $CPKG/version.Version=$CONTAINERD_VERSION -X $CPKG/version.Package=$CPKG" \
  "$CPKG/cmd/containerd" "$CPKG/cmd/containerd-shim-runc-v2" "$CPKG/cmd/ctr"
build cri-tools "$TMP" "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
  sigs.k8s.io/cri-tools/cmd/crictl
build coredns "$TMP" "-s -w" github.com/coredns/coredns
CNIPKG=github.com/containernetworking/plugins
build cni "$TMP/cni" "-s -w -X $CNIPKG/pkg/utils/buildversion.BuildVersion=$CNI_VERSION" \
  "$CNIPKG/plugins/main/bridge" "$CNIPKG/plugins/ipam/host-local" \
  "$CNIPKG/plugins/main/loopback" "$CNIPKG/plugins/meta/portmap"
ln -s "$RUNC" "$TMP/runc"
complete "$TMP" || { echo "node: the build left a part out of $TMP" >&2; exit 1; }
"$TMP/kubelet" --version >&2
"$TMP/containerd" --version >&2
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "node: built in $(( $(date +%s) - start )) s into $OUT" >&2
echo "$OUT"
