"""``arcflow sim kube``: run the Kubernetes API emulator standalone (for kubectl or a service)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from arcflow.common.service.signals import COMMAND_STOP_SIGNALS, stop_on_signals
from arcflow.devstack.kube_emulator import KubeEmulator


async def _serve(host: str, port: int, kubeconfig_out: Path | None, history_limit: int) -> None:
    with stop_on_signals(COMMAND_STOP_SIGNALS) as stop:
        async with KubeEmulator(host, port, history_limit=history_limit) as emulator:
            target = kubeconfig_out or Path(tempfile.mkdtemp(prefix="arcflow-kube-")) / "kubeconfig"
            path = emulator.write_kubeconfig(target)
            click.echo(f"kubeconfig: {path}")
            click.echo(f"url: {emulator.url}")
            click.echo(f"try: KUBECONFIG={path} kubectl get autoscalingrunnersets -A")
            await stop.wait()


@click.command(name="kube")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="TCP port (0: any free port)",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="where to write the kubeconfig (default: a fresh temp directory)",
)
@click.option(
    "--history-limit",
    type=click.IntRange(1),
    default=10_000,
    show_default=True,
    help="watch events kept for resuming; older resourceVersions get 410",
)
def sim_kube_command(port: int, host: str, kubeconfig_out: Path | None, history_limit: int) -> None:
    """Run the stateful Kubernetes API emulator until SIGINT/SIGTERM."""
    try:
        asyncio.run(_serve(host, port, kubeconfig_out, history_limit))
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from None
