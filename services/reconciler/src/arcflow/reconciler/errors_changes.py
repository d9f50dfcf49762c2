"""Registration failures from the registrar and the listener's session failures and openings
(``reconciler-errors`` on ``arc.errors.>``): each wakes its ARS, so the ARS shows the failure
as its ``ScaleSetsRegistered`` or ``ListenerSessionsOpen`` condition and a Warning Event (ADR
0064). The ARS controller's declaration (``controllers/declared.py``) says the runtime keeps
the newest one per ARS (registration) or per variant (sessions), where the pass reads it (ADR
0095); this handler writes nothing itself. That memory gives the reasons; what is open now
comes from the listener's sessions bucket, so losing it (a restart) never turns the condition
True while a session is missing (ADR 0073). ``spec.invalid`` needs nothing here: the
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
    await state.on_event(event, delivery)
