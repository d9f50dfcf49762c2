"""Placeholder until the Actions simulator lands."""

import click


@click.command(name="actions")
def sim_actions_command() -> None:
    raise click.ClickException("not implemented yet")
