#!/usr/bin/env bash
# Builds upstream actions-runner-controller (the module compat/arc/ requires, from the Go module
# proxy) into .cache/arc/ (gitignored; rebuilt only when compat/arc changes): its controller
# (`manager`, the module's root main package) and its scale-set listener
# (`github-runnerscaleset-listener`), with the version stamp upstream's image build gives them
# (its scale-set chart's version, which the controller compares with each ARS's
# app.kubernetes.io/version label). Prints three lines: KEY=VALUE for the binaries' folder, the
# module's source folder (its charts are rendered from there at run time, never copied) and the
# version. ADR 0060, docs/benchmarks/vs-arc.md.
#
#   scripts/arc.sh            build if needed, print BIN_DIR=..., MODULE_DIR=..., VERSION=...
#
# Needs Go 1.26 (GOTOOLCHAIN=local; the module proxy must be reachable for a first build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SRC="$ROOT/compat/arc"
MODULE="github.com/actions/actions-runner-controller"
# The scale-set charts of that module (charts/gha-runner-scale-set*/Chart.yaml) are 0.6.1.
STAMP="0.6.1"

if ! command -v go >/dev/null 2>&1; then
  echo "arc: no Go toolchain: install Go 1.26 (scripts/install-tools.sh on project machines) and make sure the module proxy is reachable" >&2
  exit 2
fi
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

KEY="$(cat "$SRC"/go.mod "$SRC"/go.sum "$0" | sha256sum | cut -c1-12)"
OUT="${ARCFLOW_CACHE_DIR:-$ROOT/.cache}/arc/arc-$KEY"
if [ ! -x "$OUT/manager" ] || [ ! -x "$OUT/github-runnerscaleset-listener" ]; then
  echo "arc: building $MODULE (controller and listener) ..." >&2
  TMP="$OUT.tmp.$$"
  mkdir -p "$TMP"
  FLAGS="-s -w -X $MODULE/build.Version=$STAMP -X $MODULE/build.CommitSHA=module-proxy"
  (cd "$SRC" && go build -trimpath -ldflags="$FLAGS" -o "$TMP/manager" "$MODULE")
  (cd "$SRC" && go build -trimpath -ldflags="$FLAGS" -o "$TMP/github-runnerscaleset-listener" "$MODULE/cmd/githubrunnerscalesetlistener")
  rm -rf "$OUT"
  mv "$TMP" "$OUT"
  # Builds of older sources are never used again.
  find "$(dirname "$OUT")" -mindepth 1 -maxdepth 1 -name 'arc-*' ! -name "arc-$KEY" -exec rm -rf {} +
fi
MODULE_DIR="$(cd "$SRC" && go list -m -f '{{.Dir}}' "$MODULE")"
if [ ! -d "$MODULE_DIR/charts/gha-runner-scale-set-controller" ]; then
  (cd "$SRC" && go mod download "$MODULE")
fi
echo "BIN_DIR=$OUT"
echo "MODULE_DIR=$MODULE_DIR"
echo "VERSION=$(cd "$SRC" && go list -m -f '{{.Version}}' "$MODULE")"
