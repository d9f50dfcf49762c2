"""Durable JetStream consumers feeding :meth:`Registrar.converge`.

Two durable pull consumers on the watcher's ``ARC_K8S`` stream:

* ``registrar-ars`` (``arc.k8s.autoscalingrunnersets.>``): any ARS change -> converge it;
* ``registrar-ers`` (``arc.k8s.ephemeralrunnersets.>``): an ERS deleted (or being deleted) ->
  converge its ARS, so a removal that waited for the ERS to go proceeds at once.

Settlement (ack, nak with backoff, dead letter) is the common
:class:`~arcflow.common.nats.EventConsumer`'s; we only fetch and hand it each message. A
replica crash mid-handling leaves the message unacked, so JetStream redelivers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Final

import nats.errors
from nats.js import JetStreamContext

from arcflow.common import subjects
from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.events import EventBase, K8sObjectChanged
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from arcflow.common.nats import (
    CONSUMER_REGISTRAR_ARS,
    STREAM_K8S,
    ConsumerSpec,
    Delivery,
    EventConsumer,
)
from arcflow.common.tasks import cancel_and_wait
from arcflow.registrar.service import Registrar

log = logging.getLogger(__name__)

CONSUMER_REGISTRAR_ERS: Final = ConsumerSpec(
    durable="registrar-ers",
    stream=STREAM_K8S.name,
    filter_subject=subjects.k8s_filter(EPHEMERAL_RUNNER_SET.plural),
    description="registrar: ERS deleted -> re-check pending scale set deletions of its ARS",
    ack_wait_seconds=60.0,
)


def ars_of_event(event: K8sObjectChanged) -> tuple[str, str] | None:
    """The ARS an event asks the registrar to converge, or ``None`` to ignore it."""
    if event.resource == AUTOSCALING_RUNNER_SET.plural:
        return event.namespace, event.name
    if event.resource == EPHEMERAL_RUNNER_SET.plural:
        gone = event.change == "DELETED" or event.deletion_timestamp is not None
        ars = event.labels.get(LABEL_SCALE_SET_NAME)
        if not gone or not ars:
            return None
        return event.labels.get(LABEL_SCALE_SET_NAMESPACE) or event.namespace, ars
    return None


class ChangeConsumer:
    """Fetch loop of one durable consumer; one task per consumer."""

    def __init__(
        self,
        js: JetStreamContext,
        registrar: Registrar,
        spec: ConsumerSpec,
        *,
        batch: int = 16,
        fetch_timeout: float = 1.0,
        retry_delay_seconds: float | None = None,
        retry_delay_cap_seconds: float | None = None,
    ) -> None:
        if retry_delay_seconds is not None:
            spec = replace(spec, retry_delay_seconds=retry_delay_seconds)
        if retry_delay_cap_seconds is not None:
            spec = replace(spec, retry_delay_cap_seconds=retry_delay_cap_seconds)
        self.spec = spec
        self._js = js
        self._registrar = registrar
        self._batch = batch
        self._fetch_timeout = fetch_timeout
        self._settler = EventConsumer(
            spec,
            self._handle,
            service="registrar",
            event_types=(K8sObjectChanged,),
            dead_letter_target=js,
        )
        self._task: asyncio.Task[None] | None = None
        self.running = False
        self.handled = 0

    async def _handle(self, event: EventBase, delivery: Delivery) -> None:
        assert isinstance(event, K8sObjectChanged)
        target = ars_of_event(event)
        if target is None:
            return
        await self._registrar.converge(*target, trigger=event.resource)
        self.handled += 1

    async def start(self) -> None:
        subscription = await self._js.pull_subscribe_bind(
            durable=self.spec.durable, stream=self.spec.stream
        )
        self.running = True
        self._task = asyncio.create_task(self._run(subscription), name=self.spec.durable)

    async def _run(self, subscription: JetStreamContext.PullSubscription) -> None:
        try:
            while True:
                try:
                    messages = await subscription.fetch(self._batch, timeout=self._fetch_timeout)
                except (nats.errors.TimeoutError, TimeoutError):
                    continue  # nothing to fetch (nats-py raises either kind)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning(
                        "fetch failed (%s); retrying",
                        type(exc).__name__,
                        extra={"consumer": self.spec.durable, "error": type(exc).__name__},
                    )
                    await asyncio.sleep(self._fetch_timeout)
                    continue
                await asyncio.gather(*(self._settler.process(m) for m in messages))
        finally:
            self.running = False
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None


__all__ = ["CONSUMER_REGISTRAR_ARS", "CONSUMER_REGISTRAR_ERS", "ChangeConsumer", "ars_of_event"]
