#!/usr/bin/env bash
# The version a release tag stands for, checked against the charts (docs/deploy.md, "Releases";
# ADR 0059): a tag vX.Y.Z releases X.Y.Z only when every chart in deploy/helm has
# `version: X.Y.Z` and `appVersion: "X.Y.Z"` (the image tag its templates default to) and the
# umbrella charts depend on X.Y.Z of their arcflow component charts. Prints X.Y.Z, else names
# every mismatch and exits 1. The release workflow's first job runs it.
#
#   scripts/release-version.sh v0.2.0
#   CHARTS_DIR=/elsewhere/helm scripts/release-version.sh v0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:?usage: scripts/release-version.sh vX.Y.Z}"
charts="${CHARTS_DIR:-deploy/helm}"
if [[ ! "$tag" =~ ^v([0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
  echo "release-version: the tag '$tag' is not vX.Y.Z" >&2
  exit 1
fi
version="${BASH_REMATCH[1]}"
bad=0
found=0
for chart_yaml in "$charts"/*/Chart.yaml; do
  [ -f "$chart_yaml" ] || continue
  found=$((found + 1))
  chart="$(basename "$(dirname "$chart_yaml")")"
  field() { awk -v key="$1:" 'index($0, key) == 1 {gsub(/"/, "", $2); print $2; exit}' "$chart_yaml"; }
  for key in version appVersion; do
    got="$(field "$key")"
    if [ "$got" != "$version" ]; then
      echo "release-version: $chart: $key is '${got:-missing}', the tag $tag needs $version" >&2
      bad=1
    fi
  done
  # dependencies on arcflow's own charts (a remote one such as nats keeps its own version)
  while read -r name dep_version; do
    if [ "$dep_version" != "$version" ]; then
      echo "release-version: $chart: its dependency $name is at '$dep_version', the tag $tag needs $version" >&2
      bad=1
    fi
  done < <(awk '
    /^dependencies:/ {deps = 1; next}
    deps && /^[^ #-]/ {deps = 0}
    deps && $1 == "-" && $2 == "name:" {name = $3}
    deps && $1 == "version:" && name ~ /^arcflow/ {gsub(/"/, "", $2); print name, $2}
  ' "$chart_yaml")
done
if [ "$found" -eq 0 ]; then
  echo "release-version: no charts under $charts" >&2
  exit 1
fi
[ "$bad" -eq 0 ] || exit 1
echo "$version"
