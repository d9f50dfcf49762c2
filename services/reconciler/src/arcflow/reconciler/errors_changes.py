"""Registration failures from the registrar (``reconciler-errors`` on ``arc.errors.>``): keep
the newest per ARS and re-reconcile it, so the ARS shows the failure as its
``ScaleSetsRegistered`` condition and a Warning Event (ADR 0064). ``spec.invalid`` needs
nothing here: the reconciler validates the spec itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arcflow.common.events import EventBase, RegistrationFailed
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import CONSUMER_RECONCILER_ERRORS

if TYPE_CHECKING:
    from arcflow.reconciler.state import ReconcilerState

CONSUMER = CONSUMER_RECONCILER_ERRORS


async def on_registration_error(
    state: ReconcilerState, event: EventBase, delivery: Delivery
) -> None:
    if isinstance(event, RegistrationFailed) and event.keys.namespace and event.keys.ars:
        key = (event.keys.namespace, event.keys.ars)
        known = state.context.registration_failures.get(key)
        if known is None or known.occurred_at <= event.occurred_at:
            state.context.registration_failures[key] = event
    await state.on_event(event, delivery)
