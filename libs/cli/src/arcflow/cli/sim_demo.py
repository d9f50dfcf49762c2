"""``arcflow sim demo``: the dev stack's demo against servers that run elsewhere (the
``demo`` service of docker-compose.yml): apply the example ARS, wait for its scale sets, queue
the demo jobs, wait until they completed. Exit 0 when every job succeeded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click


async def _run(kubeconfig: str, actions_url: str, example: Path, jobs: int, deadline: float) -> int:
    from arcflow.common.kube import KubeClient, KubeSettings
    from arcflow.devstack.remote_demo import RemoteDemoOptions, run_remote_demo

    kube = await KubeClient.from_settings(KubeSettings(kubeconfig=kubeconfig))
    try:
        options = RemoteDemoOptions(actions_url, example, jobs=jobs, timeout=deadline)
        summary = await run_remote_demo(kube, options, lambda line: click.echo(line))
    finally:
        await kube.close()
    click.echo(json.dumps(summary))
    return 0 if summary["jobs"]["completed"] == summary["jobs"]["total"] else 1


@click.command(name="demo")
@click.option(
    "--kubeconfig",
    envvar="ARCFLOW_KUBE_KUBECONFIG",
    required=True,
    help="the cluster to apply the example to (env ARCFLOW_KUBE_KUBECONFIG)",
)
@click.option("--actions-url", required=True, help="the Actions simulator's base URL")
@click.option(
    "--example",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="the ARS YAML to apply (examples/02-runner-variants.yaml)",
)
@click.option("--jobs", type=click.IntRange(0), default=12, show_default=True)
@click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True)
def sim_demo_command(
    kubeconfig: str, actions_url: str, example: Path, jobs: int, timeout: float
) -> None:
    """Apply the example ARS, queue demo jobs on the simulator, wait until they completed."""
    from arcflow.devstack.demo import DemoError
    from arcflow.devstack.remote_demo import RemoteDemoError

    try:
        code = asyncio.run(_run(kubeconfig, actions_url, example, jobs, timeout))
    except (RemoteDemoError, DemoError) as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
