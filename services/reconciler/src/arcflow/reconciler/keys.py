"""What the reconciler's queue holds and what a reconcile returns: a key (kind, namespace,
name) and a result. Pure: the routing and the rules import it without the queue's asyncio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["ars", "al", "ers", "er"]
KINDS: tuple[Kind, ...] = ("ars", "al", "ers", "er")
#: Lower is taken first; within a priority, first in first out.
PRIORITY: dict[Kind, int] = {"al": 0, "ars": 1, "ers": 2, "er": 3}


@dataclass(frozen=True, order=True, slots=True)
class Key:
    """What a reconcile is about: a controller kind and the object's namespace/name."""

    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Result:
    """A reconcile's verdict: done, or look again after ``requeue_after`` seconds."""

    requeue_after: float | None = None

    @staticmethod
    def done() -> Result:
        return Result()

    @staticmethod
    def again(seconds: float) -> Result:
        return Result(max(0.0, seconds))
