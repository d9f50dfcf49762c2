"""``arcflow sim actions``: run the Actions service simulator standalone until interrupted."""

from __future__ import annotations

import asyncio

import click

from arcflow.common.service.signals import COMMAND_STOP_SIGNALS, stop_on_signals
from arcflow.devstack.actions_sim import ActionsSimulator


async def _serve(
    host: str, port: int, poll_timeout: float, mode: str, org: str, advertise_url: str | None
) -> None:
    simulator = ActionsSimulator(
        host=host,
        port=port,
        advertise_url=advertise_url or "",
        poll_timeout=poll_timeout,
        mode="acquire" if mode == "acquire" else "direct",
    )
    with stop_on_signals(COMMAND_STOP_SIGNALS) as stop:
        async with simulator as sim:
            pat = sim.add_pat()
            click.echo(f"Actions simulator listening on {sim.base_url} (mode {mode})")
            click.echo(f"config URL:  {sim.config_url(org)}")
            click.echo(f"REST base:   {sim.api_url}")
            click.echo(f"control API: {sim.base_url}/_sim")
            click.echo(f"PAT (for this simulator only, worthless elsewhere): {pat}")
            click.echo("Press Ctrl+C to stop.", err=True)
            await stop.wait()
    click.echo("Actions simulator stopped.", err=True)


@click.command(name="actions")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--poll-timeout",
    default=50.0,
    show_default=True,
    type=click.FloatRange(min=0.0),
    help="Seconds a message long poll blocks before answering 202.",
)
@click.option(
    "--mode",
    type=click.Choice(["direct", "acquire"]),
    default="direct",
    show_default=True,
    help="direct: JobAssigned (github.com); acquire: JobAvailable + acquirejobs (GHES).",
)
@click.option("--org", default="example-org", show_default=True, help="Org of the config URL.")
@click.option(
    "--advertise-url",
    default=None,
    help="Base URL clients reach the simulator at, used in the URLs it hands out "
    "(default: http://HOST:PORT); e.g. http://actions-sim:8090 in docker compose.",
)
def sim_actions_command(
    host: str, port: int, poll_timeout: float, mode: str, org: str, advertise_url: str | None
) -> None:
    """Run the GitHub + Actions scale-set service simulator until SIGINT or SIGTERM."""
    try:
        asyncio.run(_serve(host, port, poll_timeout, mode, org, advertise_url))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
