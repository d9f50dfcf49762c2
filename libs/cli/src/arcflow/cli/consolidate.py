"""``arcflow consolidate``: many single-shape runner scale sets -> one ARS with runnerVariants.

The merged manifest goes to stdout; the notes (how variants were named, what happens to the
GitHub scale sets) and the listener pods and objects saved go to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from arcflow.cli.consolidation import (
    ConsolidationError,
    ConsolidationInput,
    consolidate,
    input_from_document,
    savings_report,
)


def _read_inputs(files: tuple[Path, ...]) -> list[ConsolidationInput]:
    inputs: list[ConsolidationInput] = []
    for path in files:
        try:
            docs = [
                d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None
            ]
        except (OSError, UnicodeDecodeError) as exc:
            raise click.ClickException(f"{path}: cannot read file: {exc}") from None
        except yaml.YAMLError as exc:
            raise click.ClickException(f"{path}: not valid YAML: {exc}") from None
        if not docs:
            raise click.ClickException(f"{path}: contains no YAML document")
        for index, doc in enumerate(docs):
            source = str(path) if len(docs) == 1 else f"{path}[{index}]"
            try:
                inputs.append(input_from_document(doc, source))
            except ConsolidationError as exc:
                raise click.ClickException(str(exc)) from None
    return inputs


@click.command(name="consolidate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="Output format of the merged AutoscalingRunnerSet.",
)
@click.option(
    "--name",
    default=None,
    help="Name of the merged set (default: the input names' common prefix).",
)
def consolidate_command(files: tuple[Path, ...], output: str, name: str | None) -> None:
    """Merge AutoscalingRunnerSet manifests or gha-runner-scale-set values FILES into one ARS.

    The inputs may differ only in template, runnerScaleSetLabels (chart: scaleSetLabels),
    minRunners and maxRunners; each becomes a runnerVariant named after its scale set (the
    common prefix stripped when that leaves DNS labels). Any other difference is refused with
    the field path and both values (credentials redacted). Exit 1 on refusal.
    """
    inputs = _read_inputs(files)
    try:
        result = consolidate(inputs, name)
    except ConsolidationError as exc:
        raise click.ClickException(f"cannot consolidate: {exc}") from None
    manifest = result.ars.to_manifest()
    if output == "json":
        click.echo(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        click.echo(yaml.safe_dump(manifest, sort_keys=False).rstrip("\n"))
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(savings_report(result), err=True)
