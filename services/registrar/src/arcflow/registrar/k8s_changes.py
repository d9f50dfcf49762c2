"""Kubernetes changes the registrar converges on, from two durable consumers on ``ARC_K8S``;
each handler only enqueues the ARS key into the converge work queue (ADR 0072):

* ``registrar-ars`` (``arc.k8s.autoscalingrunnersets.>``): any ARS change -> its key;
* ``registrar-ers`` (``arc.k8s.ephemeralrunnersets.>``): an ERS deleted (or being deleted) ->
  its ARS's key, so a removal that waited for the ERS to go proceeds at once.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from arcflow.common import subjects
from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.events import K8sObjectChanged
from arcflow.common.kube.resources import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import (
    CONSUMER_REGISTRAR_ARS,
    ENQUEUE_ACK_WAIT_SECONDS,
    STREAM_K8S,
    ConsumerSpec,
)
from arcflow.common.reconcile.manager import Manager


class Routes(Protocol):
    """What the handler needs of the registrar's state (``state.RegistrarState``)."""

    @property
    def manager(self) -> Manager[Any]: ...

    def enqueue(
        self, namespace: str, name: str, *, trigger: str, seen_version: str = ""
    ) -> None: ...


CONSUMER_REGISTRAR_ERS: Final = ConsumerSpec(
    durable="registrar-ers",
    stream=STREAM_K8S.name,
    filter_subject=subjects.k8s_filter(EPHEMERAL_RUNNER_SET.plural),
    description="registrar: ERS deleted -> re-check pending scale set deletions of its ARS",
    ack_wait_seconds=ENQUEUE_ACK_WAIT_SECONDS,
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


async def on_k8s_change(state: Routes, event: K8sObjectChanged, delivery: Delivery) -> None:
    """Enqueue the ARS the change is about (the message is acknowledged at once; the work
    queue retries the pass, not JetStream)."""
    # An ARS event names the version it saw: the pass reads the cached ARS when it holds
    # that version (no GET per status change, ADR 0031); an ERS event's version is not the ARS's.
    seen = event.resource_version if event.resource == AUTOSCALING_RUNNER_SET.plural else ""
    for key in state.manager.keys_for_event(event):  # controller.ARS's declaration
        state.enqueue(key.namespace, key.name, trigger=event.resource, seen_version=seen)


__all__ = ["CONSUMER_REGISTRAR_ARS", "CONSUMER_REGISTRAR_ERS", "ars_of_event", "on_k8s_change"]
