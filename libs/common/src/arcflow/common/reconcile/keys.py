"""What a work queue holds and what a reconcile returns: a key (kind, namespace, name) and a
result. Pure: routing and rules import it without the queue's asyncio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

KindT = TypeVar("KindT", bound=str)


@dataclass(frozen=True, order=True, slots=True)
class Key(Generic[KindT]):
    """What a reconcile is about: a controller kind and the object's namespace/name.

    Generic over the kind so a service names its kinds as a ``Literal`` (the reconciler's
    ``Key = Key[Kind]``); at run time every key is this one class."""

    kind: KindT
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
