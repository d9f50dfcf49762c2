"""One variant's scale set as the registrar recorded it, parsed from a KV value (pure: the rules
use it without the NATS client that reads the bucket, :mod:`arcflow.reconciler.scalesets`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from arcflow.common.scaleset_records import ScaleSetRecord


@dataclass(frozen=True, slots=True)
class ScaleSetAssignment:
    variant: str
    scale_set_id: int
    scale_set_name: str
    runner_group_name: str
    #: When the registrar last wrote the record (a registration after a failure clears it).
    updated_at: datetime | None = field(default=None, compare=False)


def parse_record(variant: str, data: bytes) -> ScaleSetAssignment | None:
    """The assignment in one KV value, or ``None`` if it is not a valid :class:`ScaleSetRecord`."""
    try:
        record = ScaleSetRecord.decode(data)
    except ValidationError:
        return None
    return ScaleSetAssignment(
        variant=variant,
        scale_set_id=record.scale_set_id,
        scale_set_name=record.scale_set_name,
        runner_group_name=record.runner_group_name,
        updated_at=record.updated_at,
    )
