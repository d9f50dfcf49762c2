"""``arcflow dev --kube apiserver`` end to end: the demo on a real etcd + kube-apiserver +
kube-controller-manager that the stack starts, with the pod runner as its kubelet.

While the demo runs, the connection file's kubeconfig is used as a user would (kubectl with
no other flag): it is the admin's, and the pod runner's Node is there and Ready.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arcflow.devstack import connection_file
from tests.scenario.test_dev_stack import ARCFLOW, VARIANTS, _assert_nothing_left, _env

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(400)]

KUBECTL = Path(sys.executable).parent / "kubectl"


def _kubectl(kubeconfig: str, *args: str) -> Any:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_demo_completes_on_a_real_api_server(tmp_path: Path) -> None:
    assert KUBECTL.exists(), f"kubectl is missing at {KUBECTL} (uv sync installs it)"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    summary_path = tmp_path / "summary.json"
    process = subprocess.Popen(
        [
            *ARCFLOW, "dev", "--kube", "apiserver", "--headless", "--exit-when-done",
            "--jobs", "6", "--job-duration", "2", "--timeout", "240",
            "--summary-json", str(summary_path),
        ],
        env=_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if line.startswith("example: applied"):
                break
        applied = bool(seen) and seen[-1].startswith("example: applied")
        assert applied, "".join(seen[-40:])
        details = connection_file.read(tmp / "dev.env")
        assert details is not None
        kubeconfig = details["KUBECONFIG"]
        whoami = _kubectl(kubeconfig, "auth", "whoami")
        assert "system:masters" in whoami["status"]["userInfo"]["groups"]
        node = _kubectl(kubeconfig, "get", "node", "arcflow-dev-node")
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        _, rest = process.communicate(timeout=300)
        seen.append(rest)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = "".join(seen)
    _assert_nothing_left(tmp)
    assert summary_path.exists(), stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert process.returncode == 0, stderr[-3000:]
    assert summary["ok"] is True, summary
    assert summary["kube"]["backend"] == "apiserver"
    assert summary["kube"]["version"].startswith("v1.")
    assert summary["components"]["kubernetes"].startswith("running kube-apiserver")
    assert summary["components"]["pod runner"] == "running (node arcflow-dev-node)"
    assert summary["jobs"]["total"] == summary["jobs"]["completed"] == 6
    for variant in VARIANTS:
        assert summary["jobs"]["per_variant"][variant]["completed"] == 2
    assert summary["pods_created"]["listener"] >= 1
    assert summary["pods_created"]["runner"] >= 6
    assert "demo jobs: 6/6 completed" in stderr


def test_missing_control_plane_binaries_are_a_clear_error(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp)
    env.pop("KUBEBUILDER_ASSETS", None)
    env["ARCFLOW_CONTROL_PLANE_DIR"] = str(tmp_path / "no-binaries-here")
    result = subprocess.run(
        [*ARCFLOW, "dev", "--kube", "apiserver", "--headless", "--exit-when-done", "--jobs", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Error: the Kubernetes control plane did not start" in result.stderr
    assert "Traceback" not in result.stderr
    _assert_nothing_left(tmp)
