"""Registration failures from the registrar (``reconciler-errors`` on ``arc.errors.>``): keep
the newest per ARS and re-reconcile it, so the ARS shows the failure as its
``ScaleSetsRegistered`` condition and a Warning Event (ADR 0064). The listener's
``session.failed``/``session.opened`` are kept the same way, newest per variant, for the
``ListenerSessionsOpen`` condition (ADR 0064, amendment). That memory gives the reasons; what
is open now comes from the listener's sessions bucket, so losing it (a restart) never turns the
condition True while a session is missing (ADR 0073). ``spec.invalid`` needs nothing here: the
reconciler validates the spec itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arcflow.common.events import RegistrationFailed, SessionFailed, SessionOpened
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import CONSUMER_RECONCILER_ERRORS

if TYPE_CHECKING:
    from arcflow.reconciler.state import ReconcilerState

CONSUMER = CONSUMER_RECONCILER_ERRORS


async def on_registration_error(
    state: ReconcilerState,
    event: RegistrationFailed | SessionFailed | SessionOpened,
    delivery: Delivery,
) -> None:
    if isinstance(event, RegistrationFailed) and event.keys.namespace and event.keys.ars:
        key = (event.keys.namespace, event.keys.ars)
        known = state.context.ars_state.registration_failures.get(key)
        if known is None or known.occurred_at <= event.occurred_at:
            state.context.ars_state.registration_failures[key] = event
    elif (
        isinstance(event, SessionFailed | SessionOpened) and event.keys.namespace and event.keys.ars
    ):
        variants = state.context.ars_state.session_states.setdefault(
            (event.keys.namespace, event.keys.ars), {}
        )
        seen = variants.get(event.variant)
        if seen is None or seen.occurred_at <= event.occurred_at:
            variants[event.variant] = event
    await state.on_event(event, delivery)
