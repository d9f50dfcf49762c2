"""``arcflow sim pods``: the dev stack's pod runner (kubelet stand-in) on its own, against any
Kubernetes API (the emulator in ``docker compose``) and an Actions simulator over HTTP."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from arcflow.common.service.signals import COMMAND_STOP_SIGNALS, stop_on_signals


async def _serve(kubeconfig: str, actions_url: str, work_dir: Path | None, duration: float) -> None:
    from arcflow.common.kube import KubeClient, KubeSettings
    from arcflow.devstack.http_runner import HttpRunnerBackend
    from arcflow.devstack.pod_runner import PodRunner

    kube = await KubeClient.from_settings(KubeSettings(kubeconfig=kubeconfig, qps=200, burst=400))
    folder = work_dir or Path(tempfile.mkdtemp(prefix="arcflow-pods-"))

    shown: dict[str, str] = {}

    def show(record: object) -> None:
        name = getattr(record, "name", "?")
        kind = getattr(record, "kind", "?")
        code = getattr(record, "exit_code", None)
        state = "running" if code is None else f"exited {code}"
        if shown.get(name) != state:
            shown[name] = state
            click.echo(f"{kind} pod {name}: {state}")

    runner = PodRunner(
        kube,
        folder,
        HttpRunnerBackend(actions_url, job_duration=duration),
        # The emulator has no service account tokens: listeners get the same kubeconfig. NATS
        # settings come from the listener pod's own env (the reconciler's listener settings).
        listener_env={"ARCFLOW_KUBE_KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"},
        on_change=show,
        # On a real kube-apiserver it plays kubelet too: a Node with its Lease, bindings, and
        # each listener with its pod's ServiceAccount token (the emulator serves none of it).
        kubeconfig=kubeconfig,
    )
    try:
        with stop_on_signals(COMMAND_STOP_SIGNALS) as stop:
            await runner.start()
            await runner.wait_ready(within=60)
            node = f", node {runner.node.name}" if runner.node is not None else ""
            click.echo(
                f"pod runner watching pods (kubeconfig {kubeconfig}, runners: {actions_url}{node})"
            )
            await stop.wait()
    finally:
        await runner.stop()
        await kube.close()


@click.command(name="pods")
@click.option(
    "--kubeconfig",
    envvar="ARCFLOW_KUBE_KUBECONFIG",
    required=True,
    help="cluster whose pods to play (env ARCFLOW_KUBE_KUBECONFIG)",
)
@click.option(
    "--actions-url",
    required=True,
    help="the Actions simulator's base URL (runner pods run their jobs there)",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where listener configs and logs go (default: a fresh temp directory)",
)
@click.option(
    "--job-duration",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="seconds a runner spends on a job",
)
def sim_pods_command(
    kubeconfig: str, actions_url: str, work_dir: Path | None, job_duration: float
) -> None:
    """Play kubelet for arcflow's pods: listener pods as `python -m arcflow.listener`
    processes, runner pods as runners of the Actions simulator, until SIGINT/SIGTERM."""
    asyncio.run(_serve(kubeconfig, actions_url, work_dir, job_duration))
