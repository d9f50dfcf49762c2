"""Between the work queue and the controllers (the shape of controller-runtime's Reconciler,
ADR 0050): a key in; the primary object read once (the watch-fed cache first), "gone" handled
alike for every kind, the object parsed once into its model, and the controller's
``reconcile(ctx, obj)`` called with the typed object.

An object that does not parse cannot be reconciled as it is: a Warning Kubernetes Event on it
names the problems (field paths and messages, never values), once per resourceVersion, and
the pass raises :class:`UnparsableObjectError`, a :class:`~arcflow.common.errors.TerminalError`:
the work queue drops the key until the object changes. No retry loop, and the other keys go
on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from arcflow.common.constants import (
    KIND_ARS,
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.errors import TerminalError
from arcflow.common.kube import Resource, build_event
from arcflow.common.models import InvalidManifestError, KubeObject
from arcflow.common.validation import FieldError, summarize
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, read_observed
from arcflow.reconciler.controllers.manifest import Manifest, labels_of, meta
from arcflow.reconciler.keys import Key, Result

M = TypeVar("M", bound=KubeObject)

REASON_UNPARSABLE = "InvalidObject"


class UnparsableObjectError(TerminalError):
    """The primary object does not match its kind's schema: nothing can be done until it
    changes. The message names field paths, never values."""

    def __init__(self, key: Key, error: InvalidManifestError) -> None:
        self.problems = error.problems
        super().__init__(f"{key} does not parse: {problems_text(error)}")


def problems_text(error: InvalidManifestError) -> str:
    """The first problems and a count of the rest, bounded as spec errors are."""
    return summarize([FieldError(path, message) for path, message in error.problems])


OnUnparsable = Callable[[Context, Manifest, InvalidManifestError], Awaitable[None]]


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
    if ctx.unparsable_reported.get(ident) == version:
        return
    message = f"cannot reconcile: the object does not match its schema: {problems_text(error)}"
    event = build_event(
        doc, REASON_UNPARSABLE, message, type="Warning", component="arcflow-reconciler"
    )
    created = await ctx.kube.create(event)
    await ctx.writer.audit(
        "created", created, scope_of_manifest(doc), "Kubernetes Event: object does not parse"
    )
    ctx.unparsable_reported[ident] = version


@dataclass(frozen=True, slots=True)
class TypedReconciler(Generic[M]):
    """One kind's controller behind the work queue: ``await adapter(ctx, key)``."""

    resource: Resource
    model: type[M]
    reconcile: Callable[[Context, M], Awaitable[Result]]
    # Says why an object that does not parse is left alone (the default: a Warning Event).
    on_unparsable: OnUnparsable = warn_unparsable

    async def __call__(self, ctx: Context, key: Key) -> Result:
        doc = await read_observed(ctx, self.resource, key.name, key.namespace)
        if doc is None:
            return Result.done()  # gone: its finalizer pass already ran, children follow
        try:
            obj = self.model.from_observed(doc)
        except InvalidManifestError as exc:
            await self.on_unparsable(ctx, doc, exc)
            raise UnparsableObjectError(key, exc) from None
        return await self.reconcile(ctx, obj)
