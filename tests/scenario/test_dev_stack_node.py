"""``arcflow dev --kube node --headless --exit-when-done``: the dev stack's demo on a real node
(issue #30 item 6; docs/dev-stack.md, "--kube node").

The command starts a node (control plane, containerd, kubelet, kube-proxy, CoreDNS) in a network
namespace of its own, installs the umbrella chart and NATS with helm from the images, applies the
runner-variants example with the runner image in its templates, queues the demo jobs on the
simulator and exits when they completed. Checked from outside, on what the command leaves: its
exit code, its summary (every job completed on a runner pod the kubelet ran, the services
running as pods, the backend), and that the node is gone afterwards (no namespace, cgroup,
mount or process of it).

Needs root, the node's parts and the images (``scripts/test.sh`` provides both); skips without
root and says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arcflow.devstack.node import teardown
from arcflow.devstack.node.netns import PREFIX

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(600)]

JOBS = 6
SERVICES = ("watcher", "registrar", "reconciler")


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ARCFLOW_DEV_ENV"] = str(tmp / "dev.env")  # never the user's own state dir
    return env


def test_the_demo_completes_on_real_pods_and_the_node_goes_away(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a real node needs root (network namespaces, cgroups, mounts)")
    summary_path = tmp_path / "summary.json"
    command = [sys.executable, "-m", "arcflow.cli.main", "dev", "--kube", "node", "--headless",
               "--exit-when-done", "--jobs", str(JOBS), "--timeout", "300",
               "--summary-json", str(summary_path)]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, env=_env(tmp_path), timeout=560, check=False
    )
    output = (
        f"exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n"
        + (done.stderr[-6000:])
    )
    assert done.returncode == 0, output
    summary = json.loads(summary_path.read_text())

    assert summary["kube"]["backend"] == "node", output
    jobs = summary["jobs"]
    assert (jobs["total"], jobs["completed"], jobs["failed"]) == (JOBS, JOBS, 0), output
    # Every job ran on a runner pod the kubelet started (cpu-small keeps one idle runner too),
    # behind the one listener pod of the set.
    assert summary["pods_created"]["runner"] >= JOBS, summary["pods_created"]
    assert summary["pods_created"]["listener"] >= 1, summary["pods_created"]
    components = summary["components"]
    for name in SERVICES:
        assert components[name].startswith("running (pod "), components
    assert components["listener"].startswith("ready (the listener image"), components

    found = re.search(rf"running node ({re.escape(PREFIX)}\w+)", components["kubernetes"])
    assert found, components["kubernetes"]
    name = found.group(1)
    left = [f"cgroup {c}" for c in teardown.cgroup_dirs(f"/{name}")]
    left += [f"process {p}" for p in teardown.processes_mentioning(name)]
    left += [f"mount {m}" for m in teardown.mounts_under([Path("/tmp")]) if name in str(m)]
    if (Path("/run/netns") / name).exists():
        left.append(f"network namespace {name}")
    assert not left, f"left behind by node {name}: {left}"
