"""The envelope every arcflow event shares: identity, time, source, keys and trace context.

Events are immutable pydantic models. Unknown fields are ignored on parse so an older consumer
keeps working when a newer producer adds a field (bump ``schema_version`` only for breaking
changes). Events never carry secrets: no model has a field for a token, a private key, a JIT
config, a Secret's data or an object's spec.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC (events never carry naive times)."""
    return datetime.now(UTC)


def new_event_id() -> str:
    """A fresh random event id (uuid4 as a string)."""
    return str(uuid.uuid4())


class EventModel(BaseModel):
    """Base of every event payload part: frozen, tolerant of unknown fields."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, defer_build=True)


class EventKeys(EventModel):
    """What an event is about; every key optional because not every event has all of them."""

    namespace: str | None = None
    ars: str | None = None
    variant: str | None = None
    scale_set_id: int | None = None


class TraceContext(EventModel):
    """W3C trace context (https://www.w3.org/TR/trace-context/) carried inside the event.

    The same values ride in the NATS headers; keeping them in the body lets a trace survive
    when the message is copied somewhere headers are lost (a dead letter, an export).
    """

    traceparent: str
    tracestate: str | None = None


class EventBase(EventModel):
    """The envelope. Subclasses pin ``type`` with a ``Literal`` and add their payload."""

    #: Current schema version of this event type; raise it only for breaking changes.
    SCHEMA_VERSION: ClassVar[int] = 1

    type: str
    schema_version: int = 1
    id: str = Field(default_factory=new_event_id, min_length=1)
    occurred_at: datetime = Field(default_factory=utc_now)
    source: str = Field(min_length=1, description="Name of the service that emitted the event")
    keys: EventKeys = Field(default_factory=EventKeys)
    trace: TraceContext | None = None

    @field_validator("occurred_at")
    @classmethod
    def _as_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("occurred_at must be timezone-aware")
        return value.astimezone(UTC)

    def dedup_key(self) -> str | None:
        """A key identifying the *fact* this event reports, or ``None`` if every event is new.

        Two publishes with the same key inside the stream's duplicate window store one
        message (``Nats-Msg-Id``). Override where a fact can be re-emitted (a replayed watch,
        a re-delivered GitHub message).
        """
        return None
