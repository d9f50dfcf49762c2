"""The ``arcflow`` command: a thin shell over the libraries; each command has its own module.

Commands load lazily: importing every command module (the dev stack, kubernetes_asyncio, the
services) takes seconds, so ``arcflow validate`` would pay for ``arcflow dev``. The group only
knows each command's import path and short help; ``--help`` lists them without importing, and
a command's module is imported when that command runs (or its own ``--help`` is asked for).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import click


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """Where a command lives (``module:attribute``) and its one-line help for listings."""

    import_path: str
    short_help: str


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use.

    ``lazy_commands`` maps a command name to a :class:`LazyCommand`; eagerly added commands
    (``add_command``) work as usual and take precedence.
    """

    def __init__(
        self, *args: object, lazy_commands: dict[str, LazyCommand] | None = None, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands: dict[str, LazyCommand] = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self.lazy_commands:
            return command
        command = _load(self.lazy_commands[cmd_name].import_path, cmd_name)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command listing from the lazy table's short help: no command module imported."""
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:  # loaded or not: the same listing every time
                rows.append((name, self.lazy_commands[name].short_help))
                continue
            command = self.commands[name]
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _load(import_path: str, cmd_name: str) -> click.Command:
    module_name, _, attribute = import_path.partition(":")
    module = importlib.import_module(module_name)
    command = getattr(module, attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{import_path} (command {cmd_name!r}) is not a click command")
    return command


#: Every command: name -> where it lives and its short help (shown by ``arcflow --help``).
COMMANDS: dict[str, LazyCommand] = {
    "validate": LazyCommand(
        "arcflow.cli.validate:validate_command",
        "Check arcflow manifests (files or -); one 'path: message' line per problem.",
    ),
    "plan": LazyCommand(
        "arcflow.cli.offline:plan_command",
        "Print every object the reconciler would write for an ARS (offline).",
    ),
    "dev": LazyCommand(
        "arcflow.cli.dev:dev_command",
        "Run the whole stack locally with a demo workload and a live view.",
    ),
    "audit": LazyCommand(
        "arcflow.cli.audit:audit_command",
        "Tail or replay arcflow events from JetStream, filtered by keys and type.",
    ),
    "doctor": LazyCommand(
        "arcflow.cli.doctor:doctor_command",
        "Print what is stuck per set and variant, since when, why, and what to do.",
    ),
    "consolidate": LazyCommand(
        "arcflow.cli.consolidate:consolidate_command",
        "Merge several ARS manifests or chart values into one ARS with runnerVariants.",
    ),
}

#: The ``sim`` subcommands.
SIM_COMMANDS: dict[str, LazyCommand] = {
    "actions": LazyCommand(
        "arcflow.cli.sim_actions:sim_actions_command",
        "Run the Actions service simulator standalone.",
    ),
    "kube": LazyCommand(
        "arcflow.cli.sim_kube:sim_kube_command",
        "Run the Kubernetes API emulator standalone and write a kubeconfig.",
    ),
    "pods": LazyCommand(
        "arcflow.cli.sim_pods:sim_pods_command",
        "Play kubelet for arcflow's listener and runner pods (against any cluster).",
    ),
    "demo": LazyCommand(
        "arcflow.cli.sim_demo:sim_demo_command",
        "Apply the example ARS, queue demo jobs, wait until they completed.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="arcflow-cli", prog_name="arcflow")
def cli() -> None:
    """arcflow: GitHub Actions runner scale sets with runnerVariants, over NATS JetStream."""


@cli.group(name="sim", cls=LazyGroup, lazy_commands=SIM_COMMANDS)
def sim_group() -> None:
    """Run one of the dev stack's simulated servers standalone."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
