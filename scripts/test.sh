#!/usr/bin/env bash
# The test command: installs everything from the lock file, then runs the linters and the suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not integration", the fast loop).
# The chaos tests (tests/chaos and the other faults injected into whole stacks, marker `chaos`)
# are a run of their own, `scripts/test.sh --chaos` (ADR 0109): the suite leaves them out so that
# it stays under its 20-minute budget on 2 cores. A `-m` among the arguments replaces the default.
set -euo pipefail
cd "$(dirname "$0")/.."
select=(-m "not chaos")
if [ "${1:-}" = "--chaos" ]; then
  shift
  select=(-m chaos)
fi
source scripts/ensure-uv.sh
# Bytecode compiled once, here: the suite starts hundreds of Python processes (the services, the
# CLI, the dev stacks), and where PYTHONDONTWRITEBYTECODE is set (these machines set it) none of
# them could keep what it compiled, so each compiled its imports again: about 3 CPU-seconds per
# service start, half of a dev-stack scenario's time (ADR 0111).
uv sync --frozen --all-packages --compile-bytecode
uv run --frozen python -m compileall -q -j 0 libs services tests benchmarks deploy conftest.py
uv run --frozen ruff check .
uv run --frozen ruff format --check .
uv run --frozen mypy
uv run --frozen lint-imports
# The real control plane the suite runs on (built once from the Go module proxy, then cached in
# .cache/; KUBEBUILDER_ASSETS wins). ARCFLOW_TEST_KUBE=emulator runs the suite without it.
if [ "${ARCFLOW_TEST_KUBE:-apiserver}" != "emulator" ] && [ -z "${ARCFLOW_TEST_KUBECONFIG:-}" ]; then
  ARCFLOW_CONTROL_PLANE_DIR="$(bash scripts/control-plane.sh)"
  export ARCFLOW_CONTROL_PLANE_DIR
  echo "== control plane: $ARCFLOW_CONTROL_PLANE_DIR"
fi
# helm (built once from compat/helm with Go) and the other tools the chart tests use, before the
# suite so that no test waits for a build.
NO_CONTROL_PLANE=1 bash scripts/install-tools.sh
# Upstream ARC v0.27.6, the peer tests/contract/test_arc_peer.py runs (ADR 0060), built once into
# .cache/arc/ so that no test waits for a build.
if [ "${ARCFLOW_TEST_KUBE:-apiserver}" != "emulator" ]; then
  bash scripts/arc.sh >/dev/null
fi
# The four images (docs/images.md), built once with buildah on a debootstrap base and reused by
# deploy/tests/test_images.py; needs root, so elsewhere that test skips and says why.
if [ "$(id -u)" = 0 ] && [ -z "${ARCFLOW_NO_IMAGES:-}" ]; then
  bash scripts/build-images.sh
  # The real node's parts (docs/node.md): kubelet, containerd, CNI plugins, crictl, CoreDNS,
  # built once from the Go module proxy into .cache/node/; tests/scenario/test_real_node.py
  # starts a node from them (root only: namespaces, cgroups, mounts).
  ARCFLOW_NODE_DIR="$(bash scripts/node.sh)"
  export ARCFLOW_NODE_DIR
  echo "== node: $ARCFLOW_NODE_DIR"
fi
set +e
# Two pytest workers (pytest-xdist), one test file at a time each: the tests mostly wait on servers,
# so two workers on two cores halve the wall time. ARCFLOW_TEST_WORKERS=0 runs them in this process.
# Files go out longest kinds first (tests/file_order.py), not xdist's most-tests-first.
# The 30 slowest tests are listed at the end: the suite must stay under 20 minutes on 2 cores.
uv run --frozen pytest -n "${ARCFLOW_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=30 "${select[@]}" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
