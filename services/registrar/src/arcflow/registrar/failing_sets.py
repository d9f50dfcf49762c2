"""Scale sets whose JIT requests the Actions service is failing: one probe at a time.

When a JIT config request for a scale set ends in an upstream failure (5xx or 429 after the
retries that fit the caller's budget, or no answer in it), later requests for that scale set
are answered at once with the same failure for ``hold`` seconds, and after that only one goes
to GitHub at a time until one succeeds. A scale set in an outage so costs the registrar and
its callers one slot, not one per runner, and its siblings' requests never wait behind it
(reliability finding 2, ADR 0044). Healthy scale sets pass untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Failing:
    until: float
    reason: str
    probing: bool = False


class FailingScaleSets:
    def __init__(self, hold: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._hold = hold
        self._clock = clock
        self._failing: dict[int, _Failing] = {}

    def refusal(self, scale_set_id: int) -> str | None:
        """Why a request for this scale set is not sent now (``None``: send it). Taking the
        probe of a failing set (hold over, none in flight) returns ``None`` and marks it."""
        state = self._failing.get(scale_set_id)
        if state is None:
            return None
        left = state.until - self._clock()
        if left > 0 or state.probing:
            wait = f"{left:.1f} s" if left > 0 else "the request in flight"
            return (
                f"the Actions service is failing requests for scale set {scale_set_id} "
                f"({state.reason}); not asked again before {wait}"
            )
        state.probing = True
        return None

    def failed(self, scale_set_id: int, reason: str) -> None:
        self._failing[scale_set_id] = _Failing(self._clock() + self._hold, reason)

    def succeeded(self, scale_set_id: int) -> None:
        self._failing.pop(scale_set_id, None)

    def settled(self, scale_set_id: int) -> None:
        """The request ended without a verdict on the service (e.g. a name clash)."""
        state = self._failing.get(scale_set_id)
        if state is not None:
            state.probing = False

    def __contains__(self, scale_set_id: int) -> bool:
        return scale_set_id in self._failing
