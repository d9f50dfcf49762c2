"""Kubernetes changes (``reconciler-k8s`` on ``arc.k8s.>``): enqueue the keys they route to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import CONSUMER_RECONCILER_K8S

if TYPE_CHECKING:
    from arcflow.reconciler.state import ReconcilerState

CONSUMER = CONSUMER_RECONCILER_K8S


async def on_k8s_change(
    state: ReconcilerState, event: K8sObjectChanged, delivery: Delivery
) -> None:
    await state.on_event(event, delivery)
