"""``python -m arcflow.listener`` as a real process (SIGTERM, config errors), and a single-set
listener supervised like a multi-set one."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

import pytest

from arcflow.common.listener_config import ListenerConfig
from arcflow.common.service import runtime
from arcflow.common.service.entry import EXIT_UNAVAILABLE, main
from arcflow.listener.app import Listener
from arcflow.listener.service import SERVICE

from .helpers import (
    ARS,
    ListenerRig,
    Variant,
    eventually,
    ready,
    run_listener,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

#: ``python -m arcflow.listener`` that prints the top-level modules it had loaded at exit.
AS_MAIN_LISTING_MODULES = """
import atexit, runpy, sys
names = lambda: sorted({m.split('.')[0] for m, v in sys.modules.items() if v})
atexit.register(lambda: print(' '.join(names()), flush=True))
runpy.run_module('arcflow.listener', run_name='__main__', alter_sys=True)
"""


def _env(config_path: Path, nats_url: str, kubeconfig: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "LISTENER_CONFIG_PATH": str(config_path),
            "ARCFLOW_NATS_URL": nats_url,
            "ARCFLOW_KUBE_KUBECONFIG": str(kubeconfig),
        }
    )
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


async def test_sigterm_deletes_every_session_and_exits_zero(
    rig: ListenerRig,
    tmp_path: Path,
) -> None:
    sim = rig.sim
    variants = [Variant("cpu", 0, 10), Variant("gpu", 1, 2)]
    token, ids = await rig.register(variants)
    config = rig.config(token, variants, ids, log_format="json")
    config_path = tmp_path / "config.json"
    config_path.write_text(config.to_json())
    kubeconfig = rig.kubeconfig
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        AS_MAIN_LISTING_MODULES,
        env=_env(config_path, rig.nats_url, kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(s["session"] is not None for s in snap["scaleSets"]),
            within=30,
        )
        # The gpu variant's minimum (1) reaches its ERS from the session statistics.
        await eventually(
            lambda: rig.ers_specs(variants),
            lambda s: s["gpu"].get("replicas") == 1,
        )
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert all(s["session"] is None for s in sim.snapshot()["scaleSets"])
    closed = sim.requests_matching("*/runnerscalesets/*/sessions/*", method="DELETE")
    assert sorted(r.status for r in closed) == [204, 204]
    assert token not in stderr.decode()
    assert b"message session open" in stderr
    # The spec ran on the runtime's light path: nothing heavy was imported while it served.
    loaded = set(stdout.decode().split())
    assert {"arcflow", "nats", "httpx"} <= loaded
    assert not loaded & {"faststream", "aiohttp", "pydantic_settings", "kubernetes_asyncio"}


async def test_invalid_config_is_a_clear_fatal_error(tmp_path: Path) -> None:
    token = "ghp_listenerTestSecret0123456789"
    config = ListenerConfig(
        configure_url="https://github.com/octo",
        github_token=token,
        ephemeral_runner_set_namespace="ci",
        ephemeral_runner_set_name="arc",
        runner_scale_set_id=0,
    )
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arcflow.listener",
        env={**os.environ, "LISTENER_CONFIG_PATH": str(path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    text = stderr.decode()
    assert proc.returncode == 2
    assert "fatal configuration error" in text
    assert 'RunnerScaleSetId "0" is missing' in text
    assert token not in text
    assert json.loads(path.read_text())["github_token"] == token  # the file itself is intact


def _single_set_config(tmp_path: Path) -> Path:
    config = ListenerConfig(
        configure_url="https://github.com/octo",
        github_token="ghp_listenerTestSecret0123456789",
        ephemeral_runner_set_namespace="ci",
        ephemeral_runner_set_name="arc",
        runner_scale_set_id=1,
        max_runners=1,
    )
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    return path


async def test_an_unusable_kubeconfig_exits_3(rig: ListenerRig, tmp_path: Path) -> None:
    """The common table's "dependency unavailable" (ADR 0045), after NATS connected."""
    env = _env(_single_set_config(tmp_path), rig.nats_url, tmp_path / "missing-kubeconfig")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arcflow.listener",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 3, stderr.decode()[-2000:]
    assert b"cannot load Kubernetes client configuration" in stderr
    assert b"ghp_listenerTestSecret" not in stderr


def test_nats_unreachable_at_start_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nats-py retries an unreachable server at start-up; the runtime's deadline (30 s, here
    shortened) turns that into exit 3. In this process: ``main(SERVICE)`` as ``__main__``."""
    monkeypatch.setattr(runtime, "STARTUP_CONNECT_SECONDS", 0.5)
    root = logging.getLogger()  # main() installs its log handler: restored after the test
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(_single_set_config(tmp_path)))
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://127.0.0.1:9")  # discard port: refused
    assert main(SERVICE) == EXIT_UNAVAILABLE


async def test_a_single_set_listener_is_supervised_and_never_ends(
    rig: ListenerRig,
) -> None:
    """One scale set runs the same supervised path as many (ADR 0087): a session that stays in
    conflict is retried with back-off instead of ending the process (upstream's single-set
    listener exits and its pod is recreated at once, #4356 and #4656); once the conflict clears,
    the session opens and a job scales the set."""
    sim = rig.sim
    variants = [Variant("cpu", 0, 3)]
    token, ids = await rig.register(variants)
    sim.conflict_session_create(times=3)
    config = ListenerConfig(
        configure_url=sim.config_url(),
        github_token=token,
        ephemeral_runner_set_namespace=rig.namespace,
        ephemeral_runner_set_name=variants[0].ers(ARS),
        runner_scale_set_id=ids["cpu"],
        runner_scale_set_name=ARS,
        max_runners=3,
    )
    listener = Listener(config, options=rig.options())
    assert not listener.multi
    assert listener.targets[0].owner == "listener-pod"  # bare host name in single-set mode
    stop = asyncio.Event()
    task = asyncio.ensure_future(run_listener(listener, stop))
    try:
        await eventually(lambda: ready(sim.snapshot()["scaleSets"][0]["session"]), bool, within=30)
        assert not task.done(), "the single-set listener ended on the conflicts"
        sim.enqueue_jobs(1, [variants[0].label])
        await eventually(lambda: rig.ers_specs(variants), lambda s: s["cpu"].get("replicas") == 1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    creates = sim.requests_matching("*/runnerscalesets/*/sessions", method="POST")
    assert [r.status for r in creates] == [409, 409, 409, 200]
    assert listener.units[0].pump_stats.failures == 3
