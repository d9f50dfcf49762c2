"""The reconciler's keys: the common :class:`~arcflow.common.reconcile.keys.Key` over the
reconciler's four kinds, and the order its work queue takes them in. Pure: the routing and
the rules import it without the queue's asyncio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from arcflow.common.reconcile import keys as _keys
from arcflow.common.reconcile.keys import Result

Kind = Literal["ars", "al", "ers", "er"]
KINDS: tuple[Kind, ...] = ("ars", "al", "ers", "er")
#: Lower is taken first; within a priority, first in first out.
PRIORITY: dict[Kind, int] = {"al": 0, "ars": 1, "ers": 2, "er": 3}

if TYPE_CHECKING:
    #: What a reconcile is about: a controller kind and the object's namespace/name.
    Key: TypeAlias = _keys.Key[Kind]
else:
    # At run time the one common class itself: a subscripted alias would cost a call per key
    # (and cannot set ``__orig_class__`` on a frozen, slotted dataclass).
    Key = _keys.Key

__all__ = ["KINDS", "PRIORITY", "Key", "Kind", "Result"]
