"""The ``arcflow`` command: a thin shell over the libraries; each command has its own module."""

from __future__ import annotations

import click

from arcflow.cli.offline import plan_command, validate_command
from arcflow.cli.sim_actions import sim_actions_command
from arcflow.cli.sim_kube import sim_kube_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="arcflow-cli", prog_name="arcflow")
def cli() -> None:
    """arcflow: GitHub Actions runner scale sets with runnerVariants, over NATS JetStream."""


@cli.group(name="sim")
def sim_group() -> None:
    """Run one of the dev stack's simulated servers standalone."""


cli.add_command(validate_command)
cli.add_command(plan_command)
sim_group.add_command(sim_actions_command)
sim_group.add_command(sim_kube_command)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
