#!/usr/bin/env bash
# Checks the Actions service simulator against upstream's own client library: builds the
# conformance program of compat/scaleset (github.com/actions/scaleset, the client ARC uses)
# into .cache/peers/ (gitignored; rebuilt only when its sources change), starts two simulators
# on loopback with `arcflow sim actions` (one in direct mode, one in acquire mode), runs the
# program against them and stops them on exit. Its output is the program's: one PASS/FAIL line
# per step, then "N passed, N failed"; the exit status is the program's.
#
#   scripts/peers.sh              every step
#   scripts/peers.sh -only acquire  the steps whose name contains "acquire"
#
# Needs Go 1.26 (GOTOOLCHAIN=local; the module proxy must be reachable for a first build) and
# the repo's venv (uv sync). docs/actions-simulator.md#conformance-with-upstreams-client.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SRC="$ROOT/compat/scaleset"
ARCFLOW="${ARCFLOW_BIN:-$ROOT/.venv/bin/arcflow}"

if ! command -v go >/dev/null 2>&1; then
  echo "peers: no Go toolchain: install Go 1.26 (go.dev/doc/install; scripts/install-tools.sh on project machines) and make sure the module proxy is reachable" >&2
  exit 2
fi
if [ ! -x "$ARCFLOW" ]; then
  echo "peers: $ARCFLOW not found: run 'uv sync --frozen --all-packages' first" >&2
  exit 2
fi
export GOTOOLCHAIN=local

KEY="$(cat "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go | sha256sum | cut -c1-12)"
OUT="${ARCFLOW_CACHE_DIR:-$ROOT/.cache}/peers/scaleset-$KEY"
BIN="$OUT/scaleset-conformance"
if [ ! -x "$BIN" ]; then
  echo "peers: building the scaleset conformance program ..." >&2
  mkdir -p "$OUT"
  (cd "$SRC" && go build -trimpath -o "$BIN.tmp.$$" .)
  mv "$BIN.tmp.$$" "$BIN"
  # Builds of older sources are never used again.
  find "$(dirname "$OUT")" -mindepth 1 -maxdepth 1 -name 'scaleset-*' ! -name "scaleset-$KEY" -exec rm -rf {} +
fi

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_sim MODE: starts a simulator on a free loopback port; sets URL to its base URL. Its
# stdout (which names a seeded PAT) stays in $WORK and is never printed.
start_sim() {
  local mode="$1" log="$WORK/sim-$1.out"
  # Created here: the background child opens its redirections only once it runs.
  : >"$log"
  : >"$WORK/sim-$1.err"
  "$ARCFLOW" sim actions --host 127.0.0.1 --port 0 --poll-timeout 1 --mode "$mode" >"$log" 2>"$WORK/sim-$1.err" &
  PIDS+=("$!")
  local pid="$!" deadline=$((SECONDS + 30))
  URL=""
  while [ -z "$URL" ]; do
    URL="$(sed -n 's/^Actions simulator listening on \(http:\/\/127\.0\.0\.1:[0-9]*\) .*/\1/p' "$log")"
    if [ -n "$URL" ]; then break; fi
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      echo "peers: the $mode simulator did not start:" >&2
      cat "$WORK/sim-$mode.err" >&2
      exit 1
    fi
    sleep 0.1
  done
}

start_sim direct
DIRECT="$URL"
start_sim acquire
ACQUIRE="$URL"

status=0
"$BIN" -direct "$DIRECT" -acquire "$ACQUIRE" "$@" || status=$?
exit "$status"
