#!/usr/bin/env bash
# The test command: installs everything from the lock file, then runs the linters and the suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not scenario").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-uv.sh
uv sync --frozen --all-packages
uv run --frozen ruff check .
uv run --frozen ruff format --check .
uv run --frozen mypy
uv run --frozen lint-imports
set +e
uv run --frozen pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
