"""What the registrar tells auditors and the reconciler about failures: ``registration.failed``
and ``spec.invalid`` on ``arc.errors.<ns>.<ars>``, each the same reason at most once per
:data:`REPORT_REPEAT_SECONDS` (passes retry, the sweep revisits; only news is re-published),
with the error metric and a log line."""

from __future__ import annotations

import logging
import time
from typing import Final

from nats.js import JetStreamContext

from arcflow.common import subjects
from arcflow.common.actions.errors import ActionsError, CredentialsError, ScaleSetNotFoundError
from arcflow.common.errors import is_retryable
from arcflow.common.events import EventBase, EventKeys, RegistrationFailed, SpecInvalid, SpecIssue
from arcflow.common.nats import publish_event
from arcflow.common.telemetry import redact_text
from arcflow.common.validation import FieldError, summarize
from arcflow.registrar.metrics import RegistrarMetrics

log = logging.getLogger(__name__)

SOURCE: Final = "registrar"
#: A failure already reported with the same reason is not re-published before this many seconds.
REPORT_REPEAT_SECONDS: Final = 300.0


def reason_of(exc: BaseException) -> str:
    """An exception as a bounded, redacted reason."""
    return redact_text(f"{type(exc).__name__}: {exc}")[:1000]


def failure_kind(exc: BaseException) -> str:
    """The ``kind`` of a ``registration.failed`` event for an Actions error (ADR 0064)."""
    if isinstance(exc, ScaleSetNotFoundError):
        return "scale_set_gone"
    if isinstance(exc, CredentialsError):
        return "credentials"
    if isinstance(exc, ActionsError) and exc.status in (401, 403):
        return "refused"
    if is_retryable(exc):
        return "unreachable"
    return "rejected"


class Reporter:
    """Publishes the registrar's events (failures de-duplicated per ARS, variant and reason)."""

    def __init__(
        self, js: JetStreamContext, metrics: RegistrarMetrics, source: str = SOURCE
    ) -> None:
        self.js = js
        self.metrics = metrics
        self.source = source
        self._reported: dict[tuple[str, str, str, str], tuple[str, float]] = {}

    async def publish(self, subject: str, event: EventBase) -> None:
        await publish_event(self.js, subject, event)

    def _should_report(self, key: tuple[str, str, str, str], reason: str) -> bool:
        now = time.monotonic()
        previous = self._reported.get(key)
        if (
            previous is not None
            and previous[0] == reason
            and now - previous[1] < REPORT_REPEAT_SECONDS
        ):
            return False
        self._reported[key] = (reason, now)
        return True

    def clear(self, namespace: str, ars: str) -> None:
        """The ARS converged: a later failure is news again."""
        for key in [k for k in self._reported if k[0] == namespace and k[1] == ars]:
            del self._reported[key]

    async def failure(
        self,
        namespace: str,
        ars: str,
        variant: str,
        reason: str,
        *,
        retryable: bool,
        scale_set_name: str = "",
        kind: str,
        event_kind: str = "",
    ) -> None:
        self.metrics.errors.add(1, {"kind": kind})
        log.warning(
            "registration failed",
            extra={
                "namespace": namespace,
                "ars": ars,
                "variant": variant,
                "reason": reason,
                "retryable": retryable,
            },
        )
        if not self._should_report((namespace, ars, variant, "registration.failed"), reason):
            return
        await self.publish(
            subjects.errors_subject(namespace, ars),
            RegistrationFailed(
                source=self.source,
                keys=EventKeys(namespace=namespace, ars=ars, variant=variant),
                variant=variant,
                scale_set_name=scale_set_name,
                reason=reason,
                retryable=retryable,
                kind=event_kind or kind,
            ),
        )

    async def invalid(
        self, namespace: str, name: str, generation: int | None, problems: list[FieldError]
    ) -> None:
        """``spec.invalid`` for an ARS that is not registered as it is (once per generation
        and reason)."""
        self.metrics.errors.add(1, {"kind": "spec_invalid"})
        reason = summarize(problems)
        log.warning(
            "AutoscalingRunnerSet is invalid; not registering",
            extra={"namespace": namespace, "ars": name, "errors": reason},
        )
        if not self._should_report((namespace, name, "", f"spec.invalid:{generation}"), reason):
            return
        await self.publish(
            subjects.errors_subject(namespace, name),
            SpecInvalid(
                source=self.source,
                keys=EventKeys(namespace=namespace, ars=name),
                generation=generation,
                errors=[SpecIssue(path=p.path, message=p.message) for p in problems],
            ),
        )
