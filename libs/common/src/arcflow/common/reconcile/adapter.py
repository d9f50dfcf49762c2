"""Between a work queue and a controller (the shape of controller-runtime's Reconciler,
ADR 0050): a key in; the primary object read once through the service's ``read`` (its
watch-fed cache first), "gone" handled alike for every kind, the object parsed once into its
model, and the controller's ``reconcile(ctx, obj)`` called with the typed object.

An object that does not parse cannot be reconciled as it is: the service's ``on_unparsable``
says so where users look (the reconciler: a Warning Kubernetes Event; the registrar: a
``spec.invalid`` event), and the pass raises :class:`UnparsableObjectError`, a
:class:`~arcflow.common.errors.TerminalError`: the work queue drops the key until it is added
again. No retry loop, and the other keys go on.

Generic over the context type ``C`` (what the service's controllers share) and the model
``M``; it imports no I/O itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from arcflow.common.errors import TerminalError
from arcflow.common.kube.resources import Resource
from arcflow.common.models import InvalidManifestError
from arcflow.common.reconcile.keys import Key, Result
from arcflow.common.validation import FieldError, summarize

C = TypeVar("C")
M = TypeVar("M")

Manifest = dict[str, Any]
#: ``read(ctx, resource, key)``: the object, or ``None`` when it is gone.
ReadObject = Callable[[C, Resource, Key[Any]], Awaitable[Manifest | None]]
OnUnparsable = Callable[[C, Manifest, InvalidManifestError], Awaitable[None]]
OnGone = Callable[[C, Key[Any]], Awaitable[Result]]


class UnparsableObjectError(TerminalError):
    """The primary object does not match its kind's schema: nothing can be done until it
    changes. The message names field paths, never values."""

    def __init__(self, key: Key[Any], error: InvalidManifestError) -> None:
        self.problems = error.problems
        super().__init__(f"{key} does not parse: {problems_text(error)}")


def problems_text(error: InvalidManifestError) -> str:
    """The first problems and a count of the rest, bounded as spec errors are."""
    return summarize([FieldError(path, message) for path, message in error.problems])


async def done_when_gone(ctx: Any, key: Key[Any]) -> Result:
    """The default for a key whose object no longer exists: nothing to do."""
    return Result.done()


@dataclass(frozen=True, slots=True)
class TypedReconciler(Generic[C, M]):
    """One kind's controller behind a work queue: ``await adapter(ctx, key)``."""

    resource: Resource
    parse: Callable[[Manifest], M]
    reconcile: Callable[[C, M], Awaitable[Result]]
    read: ReadObject[C]
    on_unparsable: OnUnparsable[C]
    on_gone: OnGone[C] = done_when_gone

    async def __call__(self, ctx: C, key: Key[Any]) -> Result:
        doc = await self.read(ctx, self.resource, key)
        if doc is None:
            return await self.on_gone(ctx, key)
        try:
            obj = self.parse(doc)
        except InvalidManifestError as exc:
            await self.on_unparsable(ctx, doc, exc)
            raise UnparsableObjectError(key, exc) from None
        return await self.reconcile(ctx, obj)
