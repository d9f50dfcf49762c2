"""``arcflow validate``: several files or ``-`` (standard input), every arcflow document
checked as the API server and the controllers would; other kinds are skipped with a note, so
``helm template ... | arcflow validate -`` works."""

from __future__ import annotations

import click

from arcflow.common.models import KINDS, AutoscalingRunnerSet, InvalidManifestError
from arcflow.common.validation import FieldError, inheritance_warnings, validate_manifest

from .manifest_checks import extra_checks, with_suggestions
from .manifest_input import Document, load


def _kind_and_name(doc: object) -> str:
    if not isinstance(doc, dict):
        return type(doc).__name__
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = "/".join(str(x) for x in (meta.get("namespace"), meta.get("name")) if x)
    return f"{doc.get('kind') or '(no kind)'} {name}".strip()


def is_arcflow_document(doc: object) -> bool:
    """A document arcflow validates: one of its four kinds, or something that tries to be one
    (an ``actions.github.com`` apiVersion with a misspelt kind, or no kind at all)."""
    if not isinstance(doc, dict):
        return True
    kind = doc.get("kind")
    api_version = str(doc.get("apiVersion") or "")
    return kind in KINDS or not kind or api_version.startswith("actions.github.com/")


def document_errors(doc: object) -> list[FieldError]:
    errors = with_suggestions(validate_manifest(doc))
    seen = {(e.path, e.message) for e in errors}
    errors += [e for e in extra_checks(doc) if (e.path, e.message) not in seen]
    return errors


def document_warnings(doc: object) -> list[FieldError]:
    """Legal but probably unintended (an idle runner of a variant's own shape kept forever):
    printed on stderr, the exit code stays 0 (ADR 0063)."""
    if (
        not isinstance(doc, dict)
        or doc.get("kind") != AutoscalingRunnerSet.model_fields["kind"].default
    ):
        return []
    try:
        return inheritance_warnings(AutoscalingRunnerSet.from_manifest(doc))
    except InvalidManifestError:
        return []


@click.command(name="validate")
@click.argument("files", nargs=-1, required=True, metavar="FILE... | -")
def validate_command(files: tuple[str, ...]) -> None:
    """Check the arcflow manifests in FILEs ('-' reads standard input); print one
    'path: message' line per problem.

    Several files and multi-document YAML are read, a 'kind: List' as its items; documents of
    other kinds (a chart's Deployments, ConfigMaps ...) are skipped with a note on stderr, so
    'helm template ... | arcflow validate -' works. Besides arcflow's own rules this checks
    what an API server would: unknown fields (with 'did you mean'), metadata names, and pod
    templates against the Kubernetes schema. Exit code 0 when every document is valid, 1
    otherwise.
    """
    documents = load(files)
    several_inputs = len(files) > 1
    per_source: dict[str, int] = {}
    for doc in documents:
        per_source[doc.source] = per_source.get(doc.source, 0) + 1
    checked: list[Document] = []
    problems: list[str] = []
    for doc in documents:
        where = doc.where(with_source=several_inputs, with_index=per_source[doc.source] > 1)
        shown = where
        if not is_arcflow_document(doc.body):
            click.echo(f"note: {shown + ': ' if shown else ''}skipped {_kind_and_name(doc.body)}"
                       " (not an arcflow kind)", err=True)  # fmt: skip
            continue
        checked.append(doc)
        prefix = f"{shown}: " if shown else ""
        problems.extend(prefix + str(error) for error in document_errors(doc.body))
        for warning in document_warnings(doc.body):
            click.echo(f"warning: {prefix}{warning}", err=True)
    if not checked:
        raise click.ClickException(
            "no arcflow document in the input (expected one of: " + ", ".join(KINDS) + ")"
        )
    if problems:
        for line in problems:
            click.echo(line)
        raise SystemExit(1)
    click.echo("valid" if len(checked) == 1 else f"valid ({len(checked)} documents)")
