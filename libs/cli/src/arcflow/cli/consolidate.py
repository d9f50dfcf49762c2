"""``arcflow consolidate``: many single-shape runner scale sets -> one ARS with runnerVariants.

Inputs are files (or ``-``): ARS manifests, ``helm template`` output (documents of other kinds
are skipped with a note) or ``gha-runner-scale-set`` values files, each optionally named by its
Helm release as ``RELEASE=FILE``. The merged manifest (or, with ``-o values``, values of the
arcflow-runner-set chart) goes to stdout; the notes and the listener pods and objects saved go
to stderr.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from arcflow.cli.consolidation import (
    ConsolidationError,
    ConsolidationInput,
    consolidate,
    input_from_document,
    is_chart_values,
    savings_report,
)
from arcflow.cli.consolidation_values import chart_values
from arcflow.cli.manifest_input import STDIN, load
from arcflow.common.constants import KIND_ARS

_RELEASE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class InputArg:
    path: str
    release: str | None = None


def parse_input_arg(arg: str) -> InputArg:
    """``FILE``, ``-`` or ``RELEASE=FILE`` (an existing file whose name holds '=' stays a file)."""
    if arg == STDIN or Path(arg).exists() or "=" not in arg:
        return InputArg(arg)
    release, _, path = arg.partition("=")
    if not _RELEASE.match(release):
        raise click.BadParameter(
            f"{arg!r}: {release!r} is not a Helm release name (lower case letters, digits, '-')",
            param_hint="FILES",
        )
    return InputArg(path or STDIN, release)


def read_inputs(args: tuple[str, ...]) -> tuple[list[ConsolidationInput], list[str]]:
    """The consolidation inputs and the notes about what was skipped."""
    inputs: list[ConsolidationInput] = []
    notes: list[str] = []
    kinds: dict[str, set[str]] = {}
    for arg in (parse_input_arg(a) for a in args):
        documents = load([arg.path])
        shown = "<stdin>" if arg.path == STDIN else arg.path
        for doc in documents:
            source = shown if len(documents) == 1 else f"{shown}[{doc.index}]"
            body = doc.body
            values = isinstance(body, dict) and is_chart_values(body)
            if isinstance(body, dict) and not values and body.get("kind") != KIND_ARS:
                meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
                notes.append(
                    f"{source}: skipped {body.get('kind')} {(meta or {}).get('name', '')}".rstrip()
                )
                continue
            kinds.setdefault("values files" if values else "manifests", set()).add(shown)
            if arg.release and not values:
                raise click.ClickException(
                    f"{arg.release}={shown}: a release name goes with a values file; {shown} "
                    "holds manifests (their names are already set)"
                )
            try:
                inputs.append(input_from_document(body, source, arg.release))
            except ConsolidationError as exc:
                raise click.ClickException(str(exc)) from None
    if len(kinds) > 1:
        listed = "; ".join(f"{kind}: {', '.join(sorted(files))}" for kind, files in kinds.items())
        raise click.ClickException(
            f"you mixed manifests and values files ({listed}); give either the rendered "
            "manifests (helm template ...) or the values files"
        )
    return inputs, notes


@click.command(name="consolidate")
@click.argument("files", nargs=-1, required=True, metavar="[RELEASE=]FILE...")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json", "values"]),
    default="yaml",
    show_default=True,
    help="The merged AutoscalingRunnerSet as YAML or JSON, or values for the "
    "arcflow-runner-set chart.",
)
@click.option(
    "--name",
    default=None,
    help="Name of the merged set (default: the input names' common prefix).",
)
def consolidate_command(files: tuple[str, ...], output: str, name: str | None) -> None:
    """Merge AutoscalingRunnerSet manifests, `helm template` output or gha-runner-scale-set
    values FILES ('-': standard input) into one ARS with runnerVariants.

    A values file's scale set is named by its runnerScaleSetName, else by its Helm release:
    give it as RELEASE=FILE (else the file name is used). Documents of other kinds in the
    manifests are skipped. The inputs may differ only in template, runnerScaleSetLabels (chart:
    scaleSetLabels), minRunners and maxRunners; each becomes a runnerVariant named after its
    scale set (the common prefix stripped when that leaves DNS labels). Any other difference is
    refused with the field path and both values (credentials redacted). Exit 1 on refusal.
    """
    inputs, skipped = read_inputs(files)
    for note in skipped:
        click.echo(f"note: {note}", err=True)
    try:
        result = consolidate(inputs, name)
    except ConsolidationError as exc:
        raise click.ClickException(f"cannot consolidate: {exc}") from None
    notes = list(result.notes)
    if output == "values":
        values, value_notes = chart_values(result, inputs)
        notes += value_notes
        click.echo(yaml.safe_dump(values, sort_keys=False).rstrip("\n"))
    elif output == "json":
        click.echo(json.dumps(result.ars.to_manifest(), indent=2, ensure_ascii=False))
    else:
        click.echo(yaml.safe_dump(result.ars.to_manifest(), sort_keys=False).rstrip("\n"))
    for note in notes:
        click.echo(f"note: {note}", err=True)
    click.echo(savings_report(result), err=True)
