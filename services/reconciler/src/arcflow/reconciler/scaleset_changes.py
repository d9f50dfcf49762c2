"""Scale set assignments and deletions from the registrar (``reconciler-scalesets`` on
``arc.scalesets.>``): re-reconcile the ARS they belong to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arcflow.common.events import ScaleSetAssigned, ScaleSetDeleted
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import CONSUMER_RECONCILER_SCALESETS

if TYPE_CHECKING:
    from arcflow.reconciler.state import ReconcilerState

CONSUMER = CONSUMER_RECONCILER_SCALESETS


async def on_scaleset_change(
    state: ReconcilerState, event: ScaleSetAssigned | ScaleSetDeleted, delivery: Delivery
) -> None:
    await state.on_event(event, delivery)
