#!/usr/bin/env bash
# The main job: installs what the dev stack needs from the lock file (arcflow's packages and
# their runtime dependencies: no test, lint or type-check tools) and runs the local dev stack on
# its embedded defaults (real nats-server, Kubernetes API emulator, Actions simulator, all
# services). Extra arguments go to `arcflow dev` (e.g. scripts/dev.sh --headless --exit-when-done).
#
# `--inexact` leaves alone what is already in .venv (a developer's pytest, ruff, mypy from
# scripts/test.sh stay); `--quiet` keeps uv's per-package lines off the screen above the view
# (errors still show). scripts/test.sh installs everything, the dev group included.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-uv.sh
echo "dev.sh: installing the dev stack's dependencies (uv sync --no-dev) ..." >&2
uv sync --frozen --all-packages --no-dev --inexact --quiet
exec uv run --frozen --no-sync arcflow dev "$@"
