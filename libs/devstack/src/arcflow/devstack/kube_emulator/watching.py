"""Watches: the history a watch resumes from and what one open watch is sent of each change."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field

from arcflow.common.kube.selectors import Requirement, selector_matches
from arcflow.devstack.kube_emulator.fields import FieldRequirement
from arcflow.devstack.kube_emulator.objects import Obj, ResourceKey, meta_of


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One committed change, kept for resuming watches."""

    rv: int
    type: str
    resource: ResourceKey
    namespace: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    """One open watch; the HTTP handler drains ``queue`` (``None`` ends the stream)."""

    resource: ResourceKey
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    queue: asyncio.Queue[Obj | None] = field(default_factory=asyncio.Queue)
    abort: bool = False

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        labels = meta_of(obj).get("labels")
        return selector_matches(self.labels, labels) and all(f.matches(obj) for f in self.fields)

    def wants(self, event: HistoryEvent) -> Obj | None:
        """The watch event this watcher sees for ``event``, or None."""
        if event.resource != self.resource:
            return None
        if self.namespace is not None and event.namespace != self.namespace:
            return None
        new_ok = self._matches(event.obj)
        old_ok = self._matches(event.old)
        kind = event.type
        if kind == "MODIFIED":
            if new_ok and not old_ok:
                kind = "ADDED"
            elif old_ok and not new_ok:
                kind = "DELETED"
            elif not new_ok:
                return None
        elif (kind == "ADDED" and not new_ok) or (kind == "DELETED" and not (new_ok or old_ok)):
            return None
        return {"type": kind, "object": copy.deepcopy(event.obj)}
