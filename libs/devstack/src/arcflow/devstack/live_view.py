"""The dev stack's terminal view: a per-variant table plus the tail of the event feed.

The data model (:class:`ViewModel`) is computed by pure functions from what the stack observed
(events, ERS objects, simulator snapshot, pod records); :func:`render` turns it into a rich
renderable. Tests check the model; the renderer only lays it out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from arcflow.common import constants
from arcflow.common.events import (
    EventBase,
    JobsBatch,
    K8sObjectChanged,
    MalformedEventError,
    ObjectWritten,
    RunnerLifecycle,
    ScaleDecision,
    ScaleSetAssigned,
    ScaleSetDeleted,
    parse_event,
)
from arcflow.devstack.demo import ViewCounts

EVENT_TAIL_LENGTH = 12

#: Subjects the event tail listens to: every stream's subjects, never ``arc.rpc.>`` (JIT
#: configs travel there over request/reply).
FEED_SUBJECTS: tuple[str, ...] = (
    "arc.k8s.>",
    "arc.scalesets.>",
    "arc.jobs.>",
    "arc.scale.>",
    "arc.audit.>",
    "arc.errors.>",
    "arc.dlq.>",
)


@dataclass(frozen=True)
class VariantRow:
    variant: str
    scale_set_id: int | None
    desired: int | None
    current: int
    busy: int
    queued: int
    running: int
    done: int
    failed: int


@dataclass(frozen=True)
class ViewModel:
    title: str
    rows: list[VariantRow]
    components: dict[str, str]
    events: list[str]
    notes: list[str] = field(default_factory=list)


# --- pure: events -----------------------------------------------------------------------------


def describe_event(subject: str, data: bytes) -> str:
    """One short line for the tail; unknown or malformed payloads show their subject only."""
    try:
        event = parse_event(data)
    except MalformedEventError:
        return f"{subject} (unparsed)"
    when = event.occurred_at.strftime("%H:%M:%S")
    return f"{when} {event.source:<10} {_event_text(event)}"


def _event_text(event: EventBase) -> str:
    if isinstance(event, K8sObjectChanged):
        return f"{event.change.lower()} {event.kind} {event.namespace}/{event.name}"
    if isinstance(event, ScaleSetAssigned):
        return f"scale set {event.scale_set_name} -> id {event.scale_set_id}"
    if isinstance(event, ScaleSetDeleted):
        return f"scale set {event.scale_set_name} (id {event.scale_set_id}) deleted"
    if isinstance(event, JobsBatch):
        kinds = ", ".join(sorted({str(j.message_type) for j in event.jobs})) or "statistics"
        return f"jobs batch for scale set {event.scale_set_id}: {kinds}"
    if isinstance(event, ScaleDecision):
        return (
            f"scale {event.ephemeral_runner_set} to {event.desired_replicas} "
            f"({event.assigned_jobs} assigned jobs)"
        )
    if isinstance(event, ObjectWritten):
        return f"{event.action} {event.kind} {event.namespace}/{event.name}: {event.why}"
    if isinstance(event, RunnerLifecycle):
        return f"runner {event.runner_name} {event.previous_phase or '-'} -> {event.phase}"
    return event.type


def scale_set_ids_from_events(events: Iterable[EventBase], ars: str) -> dict[str, int]:
    """Variant -> scale set id, from the registrar's assignment/deletion events (last wins)."""
    ids: dict[str, int] = {}
    for event in events:
        if event.keys.ars not in (None, ars):
            continue
        if isinstance(event, ScaleSetAssigned):
            ids[event.variant] = event.scale_set_id
        elif isinstance(event, ScaleSetDeleted):
            ids.pop(event.variant, None)
    return ids


class EventTail:
    """The last lines of the feed, plus the parsed events the view model needs."""

    def __init__(self, length: int = EVENT_TAIL_LENGTH) -> None:
        self.lines: deque[str] = deque(maxlen=length)
        self.assignments: list[EventBase] = []
        self.count = 0

    def add(self, subject: str, data: bytes) -> None:
        self.count += 1
        self.lines.append(describe_event(subject, data))
        try:
            event = parse_event(data)
        except MalformedEventError:
            return
        if isinstance(event, ScaleSetAssigned | ScaleSetDeleted):
            self.assignments.append(event)


# --- pure: objects ----------------------------------------------------------------------------


def variant_of(
    name: str, labels: Mapping[str, str] | None, ars: str, variants: Sequence[str]
) -> str | None:
    """Which variant an ERS/runner/pod belongs to: the runner-variant label, else its name
    (``<ars>-<variant>`` for an ERS, ``<ars>-<variant>-runner-...`` for runners)."""
    label = (labels or {}).get(constants.LABEL_RUNNER_VARIANT)
    if label is not None and label in variants:
        return label
    for variant in sorted(variants, key=len, reverse=True):
        base = f"{ars}-{variant}" if variant else ars
        if name == base or name.startswith(f"{base}-runner-"):
            return variant
    return None


def desired_by_variant(
    ephemeral_runner_sets: Iterable[Mapping[str, Any]], ars: str, variants: Sequence[str]
) -> dict[str, int]:
    desired: dict[str, int] = {}
    for ers in ephemeral_runner_sets:
        meta = ers.get("metadata") or {}
        variant = variant_of(str(meta.get("name", "")), meta.get("labels"), ars, variants)
        if variant is not None:
            desired[variant] = int((ers.get("spec") or {}).get("replicas") or 0)
    return desired


def busy_by_scale_set(snapshot: Mapping[str, Any] | None) -> dict[int, int]:
    """Busy runners per scale set id from an Actions simulator snapshot."""
    busy: dict[int, int] = {}
    for runner in (snapshot or {}).get("runners") or []:
        if runner.get("status") == "busy":
            scale_set_id = int(runner.get("runnerScaleSetId") or 0)
            busy[scale_set_id] = busy.get(scale_set_id, 0) + 1
    return busy


def build_view_model(
    *,
    title: str,
    variants: Sequence[str],
    scale_set_ids: Mapping[str, int],
    desired: Mapping[str, int],
    current: Mapping[str, int],
    busy: Mapping[int, int],
    jobs: Mapping[str, ViewCounts],
    components: Mapping[str, str],
    events: Iterable[str],
    notes: Iterable[str] = (),
) -> ViewModel:
    rows = []
    for variant in variants:
        scale_set_id = scale_set_ids.get(variant)
        counts = jobs.get(variant, ViewCounts())
        rows.append(
            VariantRow(
                variant=variant or "(default)",
                scale_set_id=scale_set_id,
                desired=desired.get(variant),
                current=current.get(variant, 0),
                busy=busy.get(scale_set_id, 0) if scale_set_id is not None else 0,
                queued=counts.queued,
                running=counts.running,
                done=counts.done,
                failed=counts.failed,
            )
        )
    return ViewModel(
        title=title,
        rows=rows,
        components=dict(components),
        events=list(events),
        notes=list(notes),
    )


# --- rendering --------------------------------------------------------------------------------


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def _component_style(status: str) -> str:
    if status.startswith(("running", "ready")):
        return "green"
    if status.startswith(("starting", "disabled", "external")):
        return "yellow"
    return "bold red"


def render(model: ViewModel) -> RenderableType:
    table = Table(title=model.title, expand=True)
    for header in ("variant", "scale set", "desired", "current", "busy"):
        table.add_column(header, justify="left" if header == "variant" else "right")
    for header in ("queued", "running", "done", "failed"):
        table.add_column(f"jobs {header}", justify="right")
    for row in model.rows:
        table.add_row(
            row.variant,
            _cell(row.scale_set_id),
            _cell(row.desired),
            str(row.current),
            str(row.busy),
            str(row.queued),
            str(row.running),
            str(row.done),
            str(row.failed),
        )
    components = Text()
    for name, status in model.components.items():
        components.append(f"{name}: ", style="bold")
        components.append(status, style=_component_style(status))
        components.append("   ")
    parts: list[RenderableType] = [table, components]
    for note in model.notes:
        parts.append(Text(note, style="yellow"))
    parts.append(Text("events (latest last):", style="bold"))
    parts.extend(Text(line, overflow="ellipsis", no_wrap=True) for line in model.events)
    return Group(*parts)
