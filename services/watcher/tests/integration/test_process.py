"""``python -m arcflow.watcher`` as a real process: env settings, endpoints, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from arcflow.devstack.nats_server import free_port

pytestmark = pytest.mark.integration


async def _get(url: str) -> tuple[int, str]:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status, await resp.text()
    except aiohttp.ClientError:
        return 0, ""


async def test_process_serves_endpoints_publishes_and_stops_on_sigterm(
    harness: Any, tmp_path: Path
) -> None:
    kubeconfig = harness.kubeconfig  # the process's requests go through the fault proxy
    health_port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "ARCFLOW_KUBE_KUBECONFIG": str(kubeconfig),
        "ARCFLOW_NATS_URL": harness.nats_url,
        "ARCFLOW_WATCHER_NAMESPACES": harness.namespace,
        "ARCFLOW_WATCHER_HEALTH_HOST": "127.0.0.1",
        "ARCFLOW_WATCHER_HEALTH_PORT": str(health_port),
        "ARCFLOW_WATCHER_METRICS_HOST": "127.0.0.1",
        "ARCFLOW_WATCHER_METRICS_PORT": str(metrics_port),
        "ARCFLOW_WATCHER_LOG_JSON": "true",
    }
    log_path = tmp_path / "watcher.log"  # a file: a full pipe would block the process
    await harness.kube.create(
        harness.manifest("AutoscalingRunnerSet", "ars-proc", harness.namespace)
    )
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "arcflow.watcher", env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    try:
        async with asyncio.timeout(30):  # a cold start on a loaded 2-core machine
            while (await _get(f"http://127.0.0.1:{health_port}/readyz"))[0] != 200:
                assert proc.returncode is None, "the watcher exited early"
                await asyncio.sleep(0.05)
        assert (await _get(f"http://127.0.0.1:{health_port}/healthz"))[0] == 200
        await harness.kube.create(harness.manifest("Pod", "proc-pod", harness.namespace))
        await harness.wait_keys(
            [("autoscalingrunnersets", "ars-proc", "ADDED"), ("pods", "proc-pod", "ADDED")]
        )
        status, text = await _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        assert 'arcflow_watcher_events_published_total{change="ADDED",resource="pods"}' in text
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            returncode = await proc.wait()
        assert returncode == 0
        stderr = log_path.read_text()
        assert '"msg": "watcher stopped"' in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_process_rejects_bad_settings_with_the_reason() -> None:
    env = {**os.environ, "ARCFLOW_WATCHER_NAMESPACES": "Not_A_Namespace"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "arcflow.watcher", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert b"not a valid namespace" in stderr
