"""``arcflow dev`` in its other modes: ``--kubeconfig`` (an outside cluster instead of the embedded
emulator) and ``--github-config-url`` (real GitHub; here only its bad-input path).

The outside cluster is a Kubernetes API emulator started on its own (``arcflow sim kube``) as a
stand-in for a real cluster: like a real cluster reached from a laptop, it has no kubelet that
could run arcflow's listener and runner pods against the stack's loopback NATS and simulator.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from arcflow.common.constants import ANNOTATION_SCALE_SET_IDS
from arcflow.common.kube import KubeClient, KubeSettings
from tests.polling import eventually

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(300)]

ARCFLOW = [sys.executable, "-m", "arcflow.cli.main"]
VARIANTS = ["cpu-small", "cpu-large", "gpu"]
NAMESPACE = "arc-runners"  # of examples/02-runner-variants.yaml
ARS_NAME = "arc-runners"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)
    env["ARCFLOW_DEV_ENV"] = str(tmp / "dev.env")  # never the user's own state dir
    env.pop("ARCFLOW_DEV_GITHUB_TOKEN", None)
    return env


def _processes_mentioning(marker: str) -> list[tuple[int, bytes]]:
    """(pid, cmdline) of every other process with ``marker`` in its command line or env."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if marker.encode() in cmdline or marker.encode() in (entry / "environ").read_bytes():
                found.append((int(entry.name), cmdline))
        except OSError:
            continue
    return found


async def _assert_nothing_left(tmp: Path) -> None:
    for _ in range(50):  # up to 5 s for children to finish exiting
        if not _processes_mentioning(str(tmp)):
            break
        await asyncio.sleep(0.1)
    assert _processes_mentioning(str(tmp)) == [], "a child process outlived arcflow dev"
    leftovers = [p.name for p in tmp.iterdir() if p.name.startswith("arcflow-")]
    assert leftovers == [], f"temp dirs left behind: {leftovers}"


@pytest.fixture
async def outside_cluster(tmp_path: Path) -> AsyncIterator[Path]:
    """``arcflow sim kube`` in its own process; yields the kubeconfig it wrote."""
    kubeconfig = tmp_path / "cluster" / "kubeconfig"
    kubeconfig.parent.mkdir()
    proc = await asyncio.create_subprocess_exec(
        *ARCFLOW, "sim", "kube", "--port", "0", "--kubeconfig-out", str(kubeconfig),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.startswith(b"kubeconfig: "), line
        assert kubeconfig.exists()
        yield kubeconfig
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@pytest.fixture
async def cluster_client(outside_cluster: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(outside_cluster), qps=100, burst=100, request_timeout=10)
    )
    async with client:
        yield client


async def _names(kube: KubeClient, kind: str, namespace: str | None = None) -> list[str]:
    listed = await kube.list(kind, namespace=namespace)
    return sorted(str(o["metadata"]["name"]) for o in listed.items)


#: Everything the stack and, through it, the reconciler create in the cluster.
DEMO_KINDS = (
    "AutoscalingRunnerSet",
    "EphemeralRunnerSet",
    "EphemeralRunner",
    "AutoscalingListener",
    "Pod",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
)


async def _everything(kube: KubeClient) -> list[str]:
    """``Kind ns/name`` of every object of the demo's kinds, in all namespaces (the outside
    cluster starts empty, so whatever is here came from the stack)."""
    found = []
    for kind in DEMO_KINDS:
        for obj in (await kube.list(kind)).items:
            meta = obj["metadata"]
            found.append(f"{kind} {meta.get('namespace')}/{meta['name']}")
    return sorted(found)


async def test_outside_cluster_gets_the_example_and_its_objects_but_no_pod_runs(
    tmp_path: Path, outside_cluster: Path, cluster_client: KubeClient
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    summary_path = tmp_path / "summary.json"
    kube = cluster_client
    assert await _everything(kube) == []
    proc = await asyncio.create_subprocess_exec(
        *ARCFLOW, "dev", "--headless", "--jobs", "3", "--kubeconfig", str(outside_cluster),
        "--summary-json", str(summary_path),
        env=_env(tmp),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        # Applied into the given cluster: namespace, credentials Secret, the example ARS.
        await eventually(
            lambda: _names(kube, "AutoscalingRunnerSet", NAMESPACE),
            within=120,
            interval=0.3,
            what="the example ARS in the outside cluster",
        )
        ars = await kube.get("AutoscalingRunnerSet", ARS_NAME, NAMESPACE)
        secret_name = ars["spec"]["githubConfigSecret"]
        secret = await kube.get("Secret", secret_name, NAMESPACE)
        token = base64.b64decode(secret["data"]["github_token"]).decode()
        assert token  # the simulator's PAT, handed over through the cluster
        assert ars["spec"]["githubConfigUrl"].startswith("http://127.0.0.1:")  # the simulator

        # The reconciler, pointed at the same cluster, creates one ERS per variant and the AL.
        expected_ers = sorted(f"{ARS_NAME}-{v}" for v in VARIANTS)

        async def objects_ready() -> bool:
            ers = await _names(kube, "EphemeralRunnerSet", NAMESPACE)
            return ers == expected_ers and bool(await _names(kube, "AutoscalingListener"))

        await eventually(
            objects_ready, within=120, interval=0.3, what="3 ERSs and an AutoscalingListener"
        )

        # No embedded emulator and no pod runner: the stack wrote no kubeconfig of its own,
        # and nothing plays the listener pod (it stays without a phase, no process runs it).
        (stack_dir,) = [p for p in tmp.iterdir() if p.name.startswith("arcflow-dev-")]
        assert not (stack_dir / "kubeconfig").exists()
        await eventually(
            lambda: _names(kube, "Pod"),
            within=60,
            interval=0.3,
            what="the listener pod in the outside cluster",
        )
        await asyncio.sleep(2)  # a pod runner would have started it by now
        for pod in (await kube.list("Pod")).items:
            assert (pod.get("status") or {}).get("phase") in (None, "", "Pending"), pod["status"]
        running = [c for _pid, c in _processes_mentioning(str(tmp)) if b"arcflow.listener" in c]
        assert running == []
        # The registrar registered every variant in the simulator and wrote the ids back to
        # the ARS in the outside cluster.
        ars = await kube.get("AutoscalingRunnerSet", ARS_NAME, NAMESPACE)
        registered = json.loads(ars["metadata"]["annotations"][ANNOTATION_SCALE_SET_IDS])
        assert sorted(registered) == sorted(VARIANTS)
        assert all(isinstance(i, int) and i > 0 for i in registered.values())

        proc.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = err.decode()
    assert proc.returncode == 1, stderr[-3000:]  # interrupted before the demo was done
    summary = json.loads(summary_path.read_text())
    components = summary["components"]
    assert components["kubernetes"] == f"external ({outside_cluster})"
    assert components["pod runner"].startswith("disabled")
    assert components["github"].startswith("running simulator")
    assert summary["blocked_by"] == ["pod runner"]
    assert summary["ok"] is False
    ids = summary["scale_set_ids"]
    assert sorted(ids) == sorted(VARIANTS)
    assert len(set(ids.values())) == 3
    assert ids == registered
    assert summary["pods_created"] == {"listener": 0, "runner": 0}
    # Nothing could run a runner pod, so no demo job was queued in the simulator.
    assert summary["jobs"]["requested"] == 3
    assert summary["jobs"]["total"] == 0
    assert summary["jobs"]["completed"] == 0
    assert any("not queued" in note for note in summary["notes"])
    assert summary["objects_created"]["EphemeralRunnerSet"] == 3
    assert summary["objects_created"]["AutoscalingListener"] == 1
    assert token not in stderr
    await _assert_nothing_left(tmp)
    # Torn down before the services stopped: the reconciler finalized the ARS and all its
    # children, the stack removed its credentials Secret; no orphan, no finalizer left.
    # ``left_behind`` also lists scale sets the registrar did not delete in the (embedded,
    # now gone) simulator, read from the simulator itself just before shutdown, so an empty
    # list proves the registrar deleted all three.
    assert summary["teardown"] == "removed", stderr[-3000:]
    assert summary["left_behind"] == []
    assert "left behind" not in stderr
    assert await _everything(kube) == []
    assert NAMESPACE not in await _names(kube, "Namespace")


@dataclass(frozen=True)
class _DevRun:
    returncode: int
    stderr: str
    tmp: Path  # the run's TMPDIR, to check nothing is left in it
    summary_path: Path

    def summary(self) -> dict[str, Any]:
        return cast(dict[str, Any], json.loads(self.summary_path.read_text()))


async def _dev_exit_when_done(tmp_path: Path, cluster: Path, *extra: str) -> _DevRun:
    """``arcflow dev --exit-when-done`` with 3 demo jobs against ``cluster``, run to its end."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    summary_path = tmp_path / "summary.json"
    proc = await asyncio.create_subprocess_exec(
        *ARCFLOW, "dev", "--headless", "--exit-when-done", "--jobs", "3", "--timeout", "200",
        "--kubeconfig", str(cluster), "--summary-json", str(summary_path), *extra,
        env=_env(tmp),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _out, err = await asyncio.wait_for(proc.communicate(), 240)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return _DevRun(proc.returncode, err.decode(), tmp, summary_path)


async def test_exit_when_done_reports_blocked_without_a_kubelet(
    tmp_path: Path, outside_cluster: Path, cluster_client: KubeClient
) -> None:
    run = await _dev_exit_when_done(tmp_path, outside_cluster)
    stderr = run.stderr
    # Exit 3 "blocked", not a timeout: it says at once what cannot work in this mode.
    assert run.returncode == 3, stderr[-3000:]
    summary = run.summary()
    assert summary["timed_out"] is False
    assert summary["ok"] is False
    assert summary["blocked_by"] == ["pod runner"]
    assert summary["components"]["pod runner"].startswith("disabled")
    assert summary["components"]["kubernetes"] == f"external ({outside_cluster})"
    # It blocks only once every variant is registered (registration works without a kubelet).
    assert sorted(summary["scale_set_ids"]) == sorted(VARIANTS)
    assert summary["jobs"]["requested"] == 3
    assert summary["jobs"]["total"] == 0  # not queued: nothing could run them
    assert summary["jobs"]["completed"] == 0
    assert summary["pods_created"] == {"listener": 0, "runner": 0}
    assert summary["duration_seconds"] < 200
    assert "blocked by: pod runner" in stderr
    assert "demo jobs: none queued" in stderr
    assert summary["teardown"] == "removed"
    assert summary["left_behind"] == []
    await _assert_nothing_left(run.tmp)
    assert await _everything(cluster_client) == []


async def test_keep_demo_leaves_the_example_in_the_cluster(
    tmp_path: Path, outside_cluster: Path, cluster_client: KubeClient
) -> None:
    run = await _dev_exit_when_done(tmp_path, outside_cluster, "--keep-demo")
    assert run.returncode == 3, run.stderr[-3000:]
    summary = run.summary()
    assert summary["teardown"] == "skipped (--keep-demo)"
    assert summary["left_behind"] == []
    await _assert_nothing_left(run.tmp)
    kube = cluster_client
    # The stack exits once every variant is registered, which may be before the reconciler
    # made the AutoscalingListener; what the stack applied is there, and was never deleted.
    assert await _names(kube, "AutoscalingRunnerSet", NAMESPACE) == [ARS_NAME]
    ars = await kube.get("AutoscalingRunnerSet", ARS_NAME, NAMESPACE)
    assert not ars["metadata"].get("deletionTimestamp")
    assert await _everything(kube) != []
    assert ars["spec"]["githubConfigSecret"] in await _names(kube, "Secret", NAMESPACE)


@pytest.mark.parametrize("token_env", [None, ""])
async def test_github_config_url_without_a_token_is_a_clear_usage_error(
    tmp_path: Path, token_env: str | None
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp)
    if token_env is not None:
        env["ARCFLOW_DEV_GITHUB_TOKEN"] = token_env
    proc = await asyncio.create_subprocess_exec(
        *ARCFLOW, "dev", "--headless", "--exit-when-done",
        "--github-config-url", "https://github.com/example-org",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2  # click's usage error
    assert "--github-config-url needs --github-token" in err.decode()
    assert out == b""
    # Nothing was started: no temp dir, no process.
    await _assert_nothing_left(tmp)
    assert list(tmp.iterdir()) == []


async def test_an_expired_teardown_names_exactly_what_is_left(
    tmp_path: Path, outside_cluster: Path, cluster_client: KubeClient
) -> None:
    """With no time to finalize, the leftovers are reported, never silently kept."""
    run = await _dev_exit_when_done(tmp_path, outside_cluster, "--teardown-timeout", "0")
    stderr = run.stderr
    assert run.returncode == 3, stderr[-3000:]
    summary = run.summary()
    assert summary["teardown"] == "incomplete"
    left = summary["left_behind"]
    # Whether the ARS itself is still there depends on how far the reconciler got between
    # the delete and the stop (with the watch-fed cache it can finish first), so what is left
    # is checked against the cluster below, not assumed.
    assert left, summary
    for entry in left:
        assert f"left behind: {entry}" in stderr
    await _assert_nothing_left(run.tmp)
    # Exactly what is still in the cluster was reported (the last look comes after the
    # services stopped, so nothing changed since); the credentials Secret is gone.
    remaining = await _everything(cluster_client)
    assert remaining == [e for e in left if e.split()[0] in DEMO_KINDS], (remaining, left)
    assert not [r for r in remaining if r.startswith(f"Secret {NAMESPACE}/arc-github")]
