#!/usr/bin/env bash
# The main job: installs everything from the lock file and runs the local dev stack on its
# embedded defaults (real nats-server, Kubernetes API emulator, Actions simulator, all services).
# Extra arguments go to `arcflow dev` (e.g. scripts/dev.sh --headless --exit-when-done).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-uv.sh
uv sync --frozen --all-packages
exec uv run --frozen arcflow dev "$@"
