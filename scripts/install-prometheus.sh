#!/usr/bin/env bash
# The real Prometheus server and promtool the monitoring tests run (ADR 0068), from Debian's
# package, unpacked (never installed) into the gitignored cache and printed:
#
#   .cache/prometheus/<version>/prometheus
#   .cache/prometheus/<version>/promtool
#
# `apt-get download` fetches the .deb into a temporary folder (no root needed), `dpkg-deb -x`
# unpacks it there, and only the two binaries are kept (they need nothing but libc). Idempotent:
# when both binaries of the pinned version are present and run, nothing is fetched.
#
#   scripts/install-prometheus.sh          # prints the folder
#   FORCE=1 scripts/install-prometheus.sh  # fetch and unpack again
#
# A machine whose apt lists are empty (apt-get download then knows no `prometheus`) gets them
# with `apt-get update` into a private state folder of the temporary one, so root is needed for
# neither. The binaries are for the machine's own Debian architecture.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

PROMETHEUS_DEB_VERSION="2.42.0+ds-5+deb12u1"
PROMETHEUS_VERSION="2.42.0"
DEST="$ROOT/.cache/prometheus/$PROMETHEUS_DEB_VERSION"

runs() {
  [ -x "$DEST/prometheus" ] && [ -x "$DEST/promtool" ] || return 1
  "$DEST/prometheus" --version 2>&1 | grep -q "version $PROMETHEUS_VERSION" || return 1
  "$DEST/promtool" --version 2>&1 | grep -q "version $PROMETHEUS_VERSION"
}

if [ "${FORCE:-0}" != "1" ] && runs; then
  echo "$DEST"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "install-prometheus: needs $tool (Debian's prometheus $PROMETHEUS_DEB_VERSION is fetched with apt)" >&2
    exit 1
  }
done

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"  # apt's download user may read and write it

download() {
  (cd "$TMP" && apt-get download "$@" "prometheus=$PROMETHEUS_DEB_VERSION") >"$TMP/apt.log" 2>&1
}

if ! download; then
  # No lists (or stale ones): fetch the lists of the machine's sources into a private folder.
  mkdir -p "$TMP/state/lists/partial" "$TMP/cache/archives/partial"
  private=(-o "Dir::State=$TMP/state" -o "Dir::State::Lists=$TMP/state/lists"
    -o "Dir::Cache=$TMP/cache" -o "Debug::NoLocking=1")
  if ! apt-get "${private[@]}" update >"$TMP/update.log" 2>&1 || ! download "${private[@]}"; then
    echo "install-prometheus: apt-get download prometheus=$PROMETHEUS_DEB_VERSION failed:" >&2
    cat "$TMP/apt.log" "$TMP/update.log" 2>/dev/null >&2 || true
    exit 1
  fi
fi

deb="$(ls "$TMP"/prometheus_*.deb)"
dpkg-deb -x "$deb" "$TMP/root"
mkdir -p "$DEST"
for tool in prometheus promtool; do
  install -m 0755 "$TMP/root/usr/bin/$tool" "$DEST/$tool.tmp"
  mv "$DEST/$tool.tmp" "$DEST/$tool"
done

if ! runs; then
  echo "install-prometheus: the unpacked binaries do not report version $PROMETHEUS_VERSION:" >&2
  "$DEST/prometheus" --version >&2 || true
  exit 1
fi
echo "$DEST"
