"""``arcflow plan``: an offline command (no cluster, no NATS, no GitHub); ``arcflow validate``
lives in :mod:`arcflow.cli.validate`.

``plan`` calls the same :func:`arcflow.common.builders.plan_objects` the reconciler uses, so
its output is what the reconciler would write. It never has credentials: the config Secret
shows ``<redacted>`` where the token goes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml

from arcflow.common.builders import (
    BuildError,
    BuildSettings,
    ScaleSetIdError,
    decode_secret_data,
    plan_objects,
    scale_set_ids_from_annotations,
)
from arcflow.common.builders.plan import scheduled_minimums_summary
from arcflow.common.builders.settings import NATS_AUTH_USER_PASSWORD, VALID_NATS_AUTH_MODES
from arcflow.common.constants import DEFAULT_VARIANT, KIND_ARS, LISTENER_CONFIG_KEY
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.schedules import ScheduleError, parse_time, utc_now
from arcflow.common.validation import FieldError, inheritance_warnings, validate_manifest

from .manifest_input import InputError, parse_documents, read_text

DEFAULT_CONTROLLER_NAMESPACE = "arc-systems"
DEFAULT_LISTENER_IMAGE = "ghcr.io/arcflow/listener:latest"
DEFAULT_VARIANT_ALIASES = ("", "default")


_InputError = InputError


def _load_documents(path: Path) -> list[Any]:
    """The documents of ``path`` (``kind: List`` as its items); YAML errors name the line."""
    docs = parse_documents(str(path), read_text(str(path)))
    if not docs:
        raise _InputError(f"{path}: contains no YAML document")
    return docs


def _validation_lines(docs: list[Any]) -> list[str]:
    lines: list[str] = []
    for index, doc in enumerate(docs):
        errors: list[FieldError] = validate_manifest(doc)
        prefix = f"[document {index}] " if len(docs) > 1 else ""
        lines.extend(prefix + str(error) for error in errors)
    return lines


def parse_ids(values: tuple[str, ...]) -> dict[str, int]:
    """``cpu=11,gpu=12`` (repeatable). ``=7``, ``default=7`` or a bare ``7`` name the default
    variant of a set without runnerVariants."""
    ids: dict[str, int] = {}
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            name, sep, raw = item.rpartition("=")
            if not sep:
                name, raw = DEFAULT_VARIANT, item
            name = name.strip()
            if name in DEFAULT_VARIANT_ALIASES:
                name = DEFAULT_VARIANT
            try:
                number = int(raw)
            except ValueError:
                raise click.BadParameter(
                    f"{item!r}: the id must be an integer (VARIANT=ID)", param_hint="--ids"
                ) from None
            if number <= 0:
                raise click.BadParameter(f"{item!r}: the id must be > 0", param_hint="--ids")
            ids[name] = number
    return ids


def _ids_for(ars: AutoscalingRunnerSet, given: dict[str, int] | None) -> dict[str, int]:
    variants = [v.name for v in ars.spec.effective_variants()]
    if given is None:
        try:
            annotated = scale_set_ids_from_annotations(ars)
        except ScaleSetIdError:
            annotated = None
        if annotated is not None:
            shown = ", ".join(f"{name or 'default'}={i}" for name, i in annotated.items())
            click.echo(
                f"note: {ars.name}: using scale set ids from its annotations ({shown})", err=True
            )
            return annotated
        placeholders = {name: i for i, name in enumerate(variants, start=1)}
        shown = ", ".join(f"{name or 'default'}={i}" for name, i in placeholders.items())
        click.echo(
            f"note: {ars.name}: no --ids given; using placeholder scale set ids ({shown})",
            err=True,
        )
        return placeholders
    missing = [name or "default" for name in variants if name not in given]
    if missing:
        raise _InputError(f"{ars.name}: --ids has no id for: {', '.join(missing)}")
    unknown = sorted(name or "default" for name in given if name not in variants)
    if unknown:
        raise _InputError(f"{ars.name}: --ids names unknown variants: {', '.join(unknown)}")
    return {name: given[name] for name in variants}


def render_for_display(obj: dict[str, Any]) -> dict[str, Any]:
    """Secrets as readable ``stringData`` (config.json pretty-printed); other objects as is.

    Display only: the real Secret carries the compact Go-encoded bytes in ``data``.
    """
    if obj.get("kind") != "Secret" or "data" not in obj:
        return obj
    shown = {k: v for k, v in obj.items() if k != "data"}
    string_data = decode_secret_data(obj["data"])
    if LISTENER_CONFIG_KEY in string_data:
        parsed = json.loads(string_data[LISTENER_CONFIG_KEY])
        string_data[LISTENER_CONFIG_KEY] = json.dumps(parsed, indent=2, ensure_ascii=False) + "\n"
    shown["stringData"] = string_data
    return shown


class _BlockStrDumper(yaml.SafeDumper):
    """Multi-line strings (config.json) as YAML block scalars, so they stay readable."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockStrDumper.add_representer(str, _str_representer)


@click.command(name="plan")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--ids",
    "ids",
    multiple=True,
    metavar="VARIANT=ID,...",
    help="Runner scale set id per variant (default variant: '=ID' or a bare ID). "
    "Without it, placeholder ids 1, 2, ... are used.",
)
@click.option(
    "--controller-namespace",
    default=DEFAULT_CONTROLLER_NAMESPACE,
    show_default=True,
    help="Namespace of the controller (where listeners run).",
)
@click.option(
    "--listener-image", default=DEFAULT_LISTENER_IMAGE, show_default=True, help="Listener image."
)
@click.option(
    "--listener-nats-url",
    default="",
    help="NATS URL given to listener pods (the reconciler's listener_nats_url; "
    "the chart's listener.nats.url). Empty: no NATS env.",
)
@click.option(
    "--listener-nats-secret",
    default="",
    help="Secret (controller namespace) with the listener's NATS credentials; only "
    "referenced, never read.",
)
@click.option(
    "--listener-nats-auth",
    type=click.Choice(list(VALID_NATS_AUTH_MODES)),
    default=NATS_AUTH_USER_PASSWORD,
    show_default=True,
    help="Keys user/password as env, or key creds mounted as a credentials file.",
)
@click.option(
    "--listener-nats-tls-secret",
    default="",
    help="Secret (controller namespace) whose ca.crt listener pods trust for NATS TLS.",
)
@click.option(
    "--at",
    "at",
    default="",
    metavar="TIME",
    help="RFC 3339 moment the scheduledOverrides windows are shown for (default: now).",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="YAML multi-document stream or a JSON list.",
)
def plan_command(
    file: Path,
    ids: tuple[str, ...],
    controller_namespace: str,
    listener_image: str,
    listener_nats_url: str,
    listener_nats_secret: str,
    listener_nats_auth: str,
    listener_nats_tls_secret: str,
    at: str,
    output: str,
) -> None:
    """Print every object the reconciler would write for the AutoscalingRunnerSet(s) in FILE.

    Offline: validates first (exit 1 on errors), touches no cluster, reads no credentials.
    Scale set ids come from --ids, else from the ARS annotations when they hold an id for
    every variant, else placeholders 1, 2, ... (each choice is noted on stderr).
    """
    docs = _load_documents(file)
    lines = _validation_lines(docs)
    if lines:
        for line in lines:
            click.echo(line, err=True)
        raise SystemExit(1)
    try:
        settings = BuildSettings(
            controller_namespace=controller_namespace,
            listener_image=listener_image,
            listener_nats_url=listener_nats_url,
            listener_nats_secret=listener_nats_secret,
            listener_nats_auth=listener_nats_auth,
            listener_nats_tls_secret=listener_nats_tls_secret,
        )
    except ValueError as exc:
        raise _InputError(str(exc)) from exc
    given = parse_ids(ids) if ids else None
    try:
        now = parse_time(at, "--at") if at else utc_now()
    except ScheduleError as exc:
        raise click.BadParameter(str(exc), param_hint="--at") from None

    objects: list[dict[str, Any]] = []
    for index, doc in enumerate(docs):
        if doc.get("kind") != KIND_ARS:
            raise _InputError(
                f"document {index}: plan takes {KIND_ARS} manifests, got {doc.get('kind')!r}"
            )
        ars = AutoscalingRunnerSet.from_manifest(doc)
        if not ars.namespace:
            click.echo(f"note: {ars.name}: no metadata.namespace; planning for 'default'", err=True)
            ars.metadata.namespace = "default"
        for warning in inheritance_warnings(ars):
            click.echo(f"warning: {ars.name}: {warning}", err=True)
        schedule = scheduled_minimums_summary(ars, now)
        if schedule:
            click.echo(f"note: {ars.name}: scheduled minimums (scheduledOverrides):", err=True)
            for line in schedule:
                click.echo(f"  {line}", err=True)
        try:
            objects.extend(plan_objects(ars, _ids_for(ars, given), settings))
        except BuildError as exc:
            raise _InputError(f"{ars.name}: {exc}") from exc

    shown = [render_for_display(obj) for obj in objects]
    if output == "json":
        click.echo(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        click.echo(
            yaml.dump_all(
                shown, Dumper=_BlockStrDumper, sort_keys=False, explicit_start=True
            ).rstrip("\n")
        )
