"""What the triggers of a queued ARS key saw, kept beside the key-only work queue (ADR 0072).

The queue holds keys only, so many events for one ARS make one pass (ADR 0042's coalescing).
Two facts of those events still matter to that pass: the newest ARS resourceVersion they saw
(the pass reads the cached ARS only when the cache holds at least that version, ADR 0031; ""
means read it over HTTP) and whether a sweep asked for the GitHub check of the scale sets
(ADR 0064). The pass also continues the trace of the newest event among them. A pass takes
its hint when it starts; events during the pass note one for the re-run the queue makes; a
pass that fails puts its hint back for its retry.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.context import Context

from arcflow.registrar.ars_reads import newest_version


@dataclass(frozen=True, slots=True)
class Hint:
    seen_version: str = ""
    verify: bool = False
    trigger: str = "retry"
    #: The trace context of the newest event that queued the key (None: a trace of its own).
    parent: Context | None = None


def merge(old: Hint, new: Hint) -> Hint:
    return Hint(
        newest_version(old.seen_version, new.seen_version),
        old.verify or new.verify,
        old.trigger,
        new.parent if new.parent is not None else old.parent,
    )


class PassHints:
    """Per ARS key: the merged hint of the triggers since its last pass started."""

    def __init__(self) -> None:
        self._hints: dict[tuple[str, str], Hint] = {}

    def note(self, key: tuple[str, str], hint: Hint) -> None:
        old = self._hints.get(key)
        self._hints[key] = hint if old is None else merge(old, hint)

    def take(self, key: tuple[str, str]) -> Hint:
        return self._hints.pop(key, None) or Hint()

    def put_back(self, key: tuple[str, str], hint: Hint) -> None:
        """A pass that did not finish: its retry answers for its triggers too."""
        self.note(key, hint)

    def __len__(self) -> int:
        return len(self._hints)
