"""The ``scale.decision`` event of one scale set: what it says, when it is published, and
where a restarted listener resumes from (the last one's headers).

A decision on a job batch is always published: its headers name the batch (GitHub message
id, session, and the stream sequence JetStream gave it), and a restarted listener reads them
back to know which batches it already decided (ADR 0014). A decision on statistics alone is
published when it changes something or on a heartbeat (ADR 0061).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import nats.js.errors
from nats.js import JetStreamContext

from arcflow.common.events import ScaleDecision
from arcflow.common.nats import STREAM_JOBS, STREAM_SCALE, publish_event
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.scaler import Decision

log = logging.getLogger("arcflow.listener.decision")

SOURCE = "listener"
MESSAGE_ID_HEADER = "Arcflow-Github-Message-Id"
SCALE_SET_ID_HEADER = "Arcflow-Scale-Set-Id"
SESSION_ID_HEADER = "Arcflow-Session-Id"
JOBS_SEQ_HEADER = "Arcflow-Jobs-Stream-Seq"
#: A statistics decision that changes nothing is published at most this often (ADR 0061; five
#: minutes since ADR 0122).
DECISION_HEARTBEAT = 300.0


@dataclass(frozen=True)
class Watermark:
    """The last batch decided: its session, GitHub message id and stream sequence."""

    scale_set_id: int
    message_id: int
    session_id: str = ""
    stream_seq: int = 0


class DecisionPublisher:
    """Publishes one scale set's decisions; knows the last one it published and when."""

    def __init__(
        self,
        target: ScaleSetTarget,
        js: JetStreamContext,
        *,
        heartbeat: float = DECISION_HEARTBEAT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._target = target
        self._js = js
        self._heartbeat = heartbeat
        self._clock = clock
        #: (desired replicas, patchID, minimum) of the last published decision, and when.
        self._last: tuple[tuple[int, int, int], float] | None = None
        #: Statistics decisions not published (they changed nothing, within the heartbeat).
        self.unpublished = 0

    def due(self, decision: Decision, minimum: int) -> bool:
        """A change of count, patchID or minimum, the heartbeat, or the first decision."""
        if self._last is None or self._last[0] != (decision.target, decision.patch_id, minimum):
            return True
        return self._clock() - self._last[1] >= self._heartbeat

    async def publish(
        self, decision: Decision, *, reason: str, minimum: int, mark: Watermark | None
    ) -> None:
        target = self._target
        headers = {SCALE_SET_ID_HEADER: str(target.scale_set_id)}
        if mark is not None:
            headers[MESSAGE_ID_HEADER] = str(mark.message_id)
            if mark.session_id:
                headers[SESSION_ID_HEADER] = mark.session_id
            if mark.stream_seq:
                headers[JOBS_SEQ_HEADER] = str(mark.stream_seq)
        event = ScaleDecision(
            source=SOURCE,
            keys=target.event_keys,
            scale_set_id=target.scale_set_id,
            ephemeral_runner_set=target.ephemeral_runner_set_name,
            desired_replicas=decision.target,
            patch_id=decision.patch_id,
            assigned_jobs=decision.assigned_jobs,
            min_runners=minimum,
            max_runners=target.max_runners,
            reason=reason,
        )
        await publish_event(self._js, target.scale_subject, event, headers=headers, timeout=10.0)
        self._last = ((decision.target, decision.patch_id, minimum), self._clock())

    async def last_mark(self) -> Watermark | None:
        """The batch the last published decision names, if it is plausible: of this scale
        set, with a session and a stream sequence not beyond the jobs stream's end."""
        target = self._target
        with contextlib.suppress(nats.js.errors.NotFoundError):
            last = await self._js.get_last_msg(STREAM_SCALE.name, target.scale_subject)
            mark = decision_mark(last.headers or {})
            if mark is None or mark.scale_set_id != target.scale_set_id:
                return None
            end = (await self._js.stream_info(STREAM_JOBS.name)).state.last_seq
            if mark.stream_seq > end:
                log.warning(
                    "%s: last decision names stream sequence %d beyond the stream's end %d; "
                    "ignored",
                    target.label,
                    mark.stream_seq,
                    end,
                )
                return None
            return mark
        return None


def decision_mark(headers: Mapping[str, str]) -> Watermark | None:
    """The batch a ``scale.decision`` names; ``None`` without session and sequence (a
    decision from before sessions were recorded, whose message id proves nothing)."""
    try:
        scale_set_id = int(headers.get(SCALE_SET_ID_HEADER, "0"))
        message_id = int(headers.get(MESSAGE_ID_HEADER, "0"))
        stream_seq = int(headers.get(JOBS_SEQ_HEADER, "0"))
    except ValueError:
        return None
    session_id = headers.get(SESSION_ID_HEADER, "")
    if not scale_set_id or not message_id or not session_id or stream_seq < 1:
        return None
    return Watermark(scale_set_id, message_id, session_id, stream_seq)
