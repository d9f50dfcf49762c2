"""The reconciler's parts of the common typed adapter (:mod:`arcflow.common.reconcile.adapter`,
ADR 0050, ADR 0072), which the controller runtime builds from ``declared.py`` (ADR 0095): the
primary object read with :func:`read_observed` (the watch-fed cache first); the controller's
model and ``reconcile(ctx, obj)`` are declared.

An object that does not parse cannot be reconciled as it is: a Warning Kubernetes Event on it
names the problems (field paths and messages, never values), once per resourceVersion, and
the pass raises :class:`UnparsableObjectError`, a :class:`~arcflow.common.errors.TerminalError`:
the work queue drops the key until the object changes. No retry loop, and the other keys go
on.
"""

from __future__ import annotations

from arcflow.common.constants import (
    KIND_ARS,
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.kube import Resource, build_event
from arcflow.common.models import InvalidManifestError
from arcflow.common.reconcile.adapter import UnparsableObjectError, problems_text
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, read_observed
from arcflow.reconciler.controllers.manifest import Manifest, labels_of, meta
from arcflow.reconciler.keys import Key

REASON_UNPARSABLE = "InvalidObject"


class UnparsableReports(dict[tuple[str, str, str], str]):
    """(kind, namespace, name) -> the resourceVersion of an object that does not parse whose
    Warning Event went out (one Event per version, however often it is looked at)."""


def scope_of_manifest(doc: Manifest) -> Scope:
    """The audit scope of an object known only as a manifest (it did not parse)."""
    labels = labels_of(doc)
    namespace = str(meta(doc).get("namespace") or "")
    if doc.get("kind") == KIND_ARS:
        return Scope(namespace, str(meta(doc).get("name") or ""))
    return Scope(
        labels.get(LABEL_SCALE_SET_NAMESPACE) or namespace,
        labels.get(LABEL_SCALE_SET_NAME, ""),
        labels.get(LABEL_RUNNER_VARIANT, ""),
    )


async def warn_unparsable(ctx: Context, doc: Manifest, error: InvalidManifestError) -> None:
    """A Warning Event on the object, once per resourceVersion (the periodic resync looks at
    it again and again; only a change deserves a new Event)."""
    ident = (str(doc.get("kind")), str(meta(doc).get("namespace")), str(meta(doc).get("name")))
    version = str(meta(doc).get("resourceVersion") or "")
    if ctx.state(UnparsableReports).get(ident) == version:
        return
    message = f"cannot reconcile: the object does not match its schema: {problems_text(error)}"
    event = build_event(
        doc, REASON_UNPARSABLE, message, type="Warning", component="arcflow-reconciler"
    )
    created = await ctx.kube.create(event)
    await ctx.writer.audit(
        "created", created, scope_of_manifest(doc), "Kubernetes Event: object does not parse"
    )
    ctx.state(UnparsableReports)[ident] = version


async def read_primary(ctx: Context, resource: Resource, key: Key) -> Manifest | None:
    """The pass's primary object, read-only (:func:`read_observed`)."""
    return await read_observed(ctx, resource, key.name, key.namespace)


__all__ = [
    "REASON_UNPARSABLE",
    "UnparsableObjectError",
    "UnparsableReports",
    "problems_text",
    "read_primary",
    "warn_unparsable",
]
