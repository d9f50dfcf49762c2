"""The ``arcflow`` group loads command modules only when a command is used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from arcflow.cli.main import COMMANDS, SIM_COMMANDS, LazyGroup, cli

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("arcflow.cli.dev", "arcflow.devstack.stack", "kubernetes_asyncio", "arcflow.cli.audit")


def _modules_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; report which heavy modules got imported."""
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps({{m: m in sys.modules for m in {list(HEAVY)!r}}}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    loaded: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return loaded


def test_importing_the_group_and_help_import_no_command_module() -> None:
    loaded = _modules_after(
        "from click.testing import CliRunner\n"
        "from arcflow.cli.main import cli\n"
        "result = CliRunner().invoke(cli, ['--help'])\n"
        "assert result.exit_code == 0, result.output\n"
    )
    assert not any(loaded.values()), loaded


def test_validate_does_not_load_the_dev_stack() -> None:
    loaded = _modules_after(
        "from click.testing import CliRunner\n"
        "from arcflow.cli.main import cli\n"
        "result = CliRunner().invoke(cli, ['validate', 'examples/01-single-scale-set.yaml'])\n"
        "assert result.exit_code == 0, result.output\n"
    )
    assert not any(loaded.values()), loaded


def test_help_lists_every_command_with_its_short_help() -> None:
    result = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    for name, entry in COMMANDS.items():
        assert f"{name}  " in result.output
        assert entry.short_help in result.output
    assert "sim  " in result.output
    sim = CliRunner().invoke(cli, ["sim", "--help"], terminal_width=200)
    for name, entry in SIM_COMMANDS.items():
        assert entry.short_help in sim.output
        assert f"{name}  " in sim.output


@pytest.mark.parametrize(
    ("path", "name"),
    [((), n) for n in COMMANDS] + [(("sim",), n) for n in SIM_COMMANDS],
)
def test_every_lazy_entry_resolves_to_a_command_of_that_name(
    path: tuple[str, ...], name: str
) -> None:
    group: click.Command = cli
    ctx = click.Context(cli)
    for part in path:
        assert isinstance(group, LazyGroup)
        found = group.get_command(ctx, part)
        assert found is not None
        group = found
    assert isinstance(group, LazyGroup)
    command = group.get_command(ctx, name)
    assert isinstance(command, click.Command)
    assert command.name == name
    assert name in group.list_commands(ctx)
    help_result = CliRunner().invoke(cli, [*path, name, "--help"])
    assert help_result.exit_code == 0, help_result.output


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output
