"""The ERS writer: a scaling decision -> one merge patch of the EphemeralRunnerSet.

It remembers what the ERS holds from this listener, which is what lets a decision be skipped
(ADR 0043: a batch that completed no job and leaves the count as last written sends no patch)
and an identical patch within a few seconds not be re-sent. Every patch carries its send time
for its patchID (ADR 0065) and, with a shared capacity, the variant's share (ADR 0062).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arcflow.common.constants import ANNOTATION_CAPACITY_SHARE
from arcflow.common.kube.errors import ForbiddenError
from arcflow.common.schedules import utc_now
from arcflow.common.stages import ANNOTATION_SCALE_REQUESTED_AT, request_stamp
from arcflow.listener.refusals import StopRefusals
from arcflow.listener.runner_status import KubePatcher
from arcflow.listener.scaler import Decision, ers_patch

if TYPE_CHECKING:  # only sets with a shared capacity import it (ADR 0074)
    from arcflow.listener.capacity import CapacityBoard

#: An ERS patch identical to the previous one is not sent again within this many seconds
#: (a forced-state patch, patchID 0, is not sent again at all, ADR 0119).
IDENTICAL_PATCH_WINDOW = 5.0
#: A batch that completed no job and leaves the count as last written sends no ERS patch
#: within this many seconds of that write (ADR 0043); after it, the batch patches as upstream.
UNCHANGED_BATCH_WINDOW = 30.0


@dataclass(frozen=True)
class Written:
    """The request the ERS holds from this listener: its body (without the stamp), its
    replicas and patchID, when it was written (monotonic) and its stamp (wall clock)."""

    body: dict[str, Any]
    replicas: int
    patch_id: int
    at: float
    requested_at: float


class ErsWriter:
    """Merge-patches one ERS; knows what it last wrote there."""

    def __init__(
        self,
        target_name: str,
        namespace: str,
        kube: KubePatcher,
        refusals: StopRefusals,
        capacity: CapacityBoard | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._name = target_name
        self._namespace = namespace
        self._kube = kube
        self.refusals = refusals
        self._capacity = capacity
        self._clock = clock
        self._wall_clock = wall_clock
        #: None until a write answers (a failed write may or may not have landed).
        self.written: Written | None = None
        self._reported_share: str | None = None
        self.patches_skipped = 0

    @property
    def requested_at(self) -> float | None:
        """The stamp of the request the ERS holds from this writer (ADR 0065)."""
        return None if self.written is None else self.written.requested_at

    def standing(self) -> tuple[int, int] | None:
        """The (replicas, patchID) written within the unchanged-batch window, else ``None``."""
        written = self.written
        if written is None or self._clock() - written.at >= UNCHANGED_BATCH_WINDOW:
            return None
        return written.replicas, written.patch_id

    async def write(self, decision: Decision) -> None:
        """The decision's patch; the same body again within the window is not re-sent (it
        would change nothing; the comparison leaves the stamp out)."""
        share = self._share_annotation()
        body = ers_patch(decision, share)
        now = self._clock()
        last = self.written
        if (
            last is not None
            and last.body == body
            and (now - last.at < IDENTICAL_PATCH_WINDOW or decision.patch_id == 0)
        ):
            # The forced state (patchID 0) the ERS holds from this writer is never re-sent:
            # the runner set applies it on each of its own passes (level-based: it creates
            # what is missing and removes idle runners above the count whenever its runners
            # change), so sending it again would only re-stamp the set and wake its
            # controllers, once per scale set per empty long poll (ADR 0119).
            self.patches_skipped += 1
            return
        self.written = None
        requested_at = round(self._wall_clock().timestamp(), 3)
        stamp = {ANNOTATION_SCALE_REQUESTED_AT: request_stamp(decision.patch_id, requested_at)}
        if not await self._patch(ers_patch(decision, {**(share or {}), **stamp})):
            return
        self.written = Written(body, decision.target, decision.patch_id, now, requested_at)
        if share:
            self._reported_share = share[ANNOTATION_CAPACITY_SHARE]

    async def write_share(self) -> None:
        """A skipped decision still reports a changed share (metadata only, no patchID)."""
        share = self._share_annotation()
        if not share or share[ANNOTATION_CAPACITY_SHARE] == self._reported_share:
            return
        if await self._patch({"metadata": {"annotations": share}}):
            self._reported_share = share[ANNOTATION_CAPACITY_SHARE]

    async def _patch(self, body: dict[str, Any]) -> bool:
        try:
            await self._kube.patch_merge(
                "EphemeralRunnerSet", self._name, body, namespace=self._namespace
            )
        except ForbiddenError:
            if not self.refusals.excused():
                raise
            return False
        return True

    def _share_annotation(self) -> dict[str, str] | None:
        if self._capacity is None:
            return None
        return {ANNOTATION_CAPACITY_SHARE: self._capacity.report(self._name).encode()}
