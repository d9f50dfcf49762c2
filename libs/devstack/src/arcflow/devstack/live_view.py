"""The dev stack's terminal view: a per-variant table plus the tail of the event feed.

The data model (:class:`ViewModel`) is computed by pure functions from what the stack observed
(events, ERS objects, simulator snapshot, pod records); :func:`render` turns it into a rich
renderable. Tests check the model; the renderer only lays it out.
"""

from __future__ import annotations

import io
import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
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
    scale_set_name: str = ""


@dataclass(frozen=True)
class Progress:
    """Where the stack is, for the phase line (all counts as observed)."""

    started: bool = False
    stopping: bool = False
    #: Stopped by the user (Ctrl-C, SIGTERM) before the demo finished.
    interrupted: bool = False
    variants: int = 0
    registered: int = 0
    requested: int = 0
    queued: int = 0
    done: int = 0
    failed: int = 0
    blocked: tuple[str, ...] = ()
    components_up: int = 0
    components: int = 0


@dataclass(frozen=True)
class Phase:
    text: str
    style: str = "yellow"


def phase_of(progress: Progress) -> Phase:
    """starting -> registering scale sets -> demo x/N -> demo complete (the stack keeps
    running until Ctrl-C), or stopping / blocked."""
    p = progress
    finished = p.queued > 0 and p.done + p.failed >= p.queued
    if p.stopping:
        at = f" at demo {p.done}/{p.queued}" if p.queued else " before the demo started"
        if finished:
            return Phase(f"stopping (demo complete: {p.done}/{p.queued})")
        if p.interrupted:
            return Phase("stopping: interrupted" + at)
        if p.blocked:
            return Phase("stopping: blocked (the demo needs " + ", ".join(p.blocked) + ")")
        return Phase("stopping" + at)
    if not p.started:
        return Phase(f"starting ({p.components_up}/{p.components} parts up)")
    if p.blocked and not finished:
        return Phase("blocked: the demo needs " + ", ".join(p.blocked), "bold red")
    if p.registered < p.variants:
        return Phase(f"registering scale sets {p.registered}/{p.variants}")
    if p.requested == 0:
        return Phase("running (no demo jobs: --jobs 0)", "green")
    if p.queued == 0:
        return Phase("queueing demo jobs")
    if not finished:
        failed = f", {p.failed} failed" if p.failed else ""
        return Phase(f"demo {p.done}/{p.queued} done{failed}")
    if p.failed:
        return Phase(f"demo finished: {p.done}/{p.queued} succeeded, {p.failed} failed", "red")
    return Phase(f"demo complete: {p.done}/{p.queued} (still running)", "bold green")


def elapsed_text(seconds: float) -> str:
    total = max(0, int(seconds))
    return f"{total // 60}:{total % 60:02d}"


@dataclass(frozen=True)
class SetRow:
    """One AutoscalingRunnerSet of the cluster (any, not only the demo's): its phase, how many
    variants have a scale set id, and every False condition (why it does not work)."""

    name: str
    phase: str
    registered: int
    variants: int
    problems: tuple[str, ...] = ()


def set_rows(manifests: Iterable[Mapping[str, Any]]) -> list[SetRow]:
    """Rows for every ARS, sorted by namespace/name (pure; ADR 0064)."""
    rows = []
    for doc in manifests:
        meta = doc.get("metadata") or {}
        spec = doc.get("spec") or {}
        status = doc.get("status") or {}
        annotations = meta.get("annotations") or {}
        variants = spec.get("runnerVariants") or []
        count = len(variants) if isinstance(variants, list) and variants else 1
        try:
            ids = json.loads(annotations.get("actions.github.com/runner-scale-set-ids") or "{}")
        except ValueError:
            ids = {}
        if not isinstance(ids, dict):
            ids = {}
        registered = len(ids) if ids else (1 if annotations.get("runner-scale-set-id") else 0)
        problems = tuple(
            f"{c.get('type')}: {c.get('reason')}: {c.get('message')}"
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("status") == "False"
        )
        rows.append(
            SetRow(
                name=f"{meta.get('namespace')}/{meta.get('name')}",
                phase=str(status.get("phase") or "-"),
                registered=min(registered, count),
                variants=count,
                problems=problems,
            )
        )
    return sorted(rows, key=lambda r: r.name)


@dataclass(frozen=True)
class ViewModel:
    title: str
    rows: list[VariantRow]
    components: dict[str, str]
    events: list[str]
    notes: list[str] = field(default_factory=list)
    phase: Phase = field(default_factory=lambda: Phase("starting"))
    elapsed: float = 0.0
    footer: list[str] = field(default_factory=list)
    #: Every AutoscalingRunnerSet in the cluster (the demo's among them).
    sets: list[SetRow] = field(default_factory=list)


# --- pure: events -----------------------------------------------------------------------------


def describe_event(subject: str, data: bytes, names: Mapping[int, str] | None = None) -> str:
    """One short line for the tail; unknown or malformed payloads show their subject only.
    ``names``: scale set id -> name, so lines name scale sets, not only ids."""
    try:
        event = parse_event(data)
    except MalformedEventError:
        return f"{subject} (unparsed)"
    when = event.occurred_at.strftime("%H:%M:%S")
    return f"{when} {event.source:<10} {_event_text(event, names or {})}"


#: Kinds as ``kubectl`` short names: event lines fit 80 columns (the title names the namespace).
SHORT_KINDS: dict[str, str] = {
    "AutoscalingRunnerSet": "ars",
    "EphemeralRunnerSet": "ers",
    "EphemeralRunner": "er",
    "AutoscalingListener": "listener",
    "ServiceAccount": "sa",
    "RoleBinding": "rolebinding",
}


def short_kind(kind: str) -> str:
    return SHORT_KINDS.get(kind, kind.lower())


def _scale_set(scale_set_id: int, names: Mapping[int, str]) -> str:
    name = names.get(scale_set_id)
    return f"{name} (id {scale_set_id})" if name else f"scale set {scale_set_id}"


def _event_text(event: EventBase, names: Mapping[int, str]) -> str:
    if isinstance(event, K8sObjectChanged):
        return f"{event.change.lower()} {short_kind(event.kind)} {event.name}"
    if isinstance(event, ScaleSetAssigned):
        return f"scale set {event.scale_set_name} -> id {event.scale_set_id}"
    if isinstance(event, ScaleSetDeleted):
        return f"scale set {event.scale_set_name} (id {event.scale_set_id}) deleted"
    if isinstance(event, JobsBatch):
        kinds = ", ".join(sorted({str(j.message_type) for j in event.jobs})) or "statistics"
        return f"jobs for {_scale_set(event.scale_set_id, names)}: {kinds}"
    if isinstance(event, ScaleDecision):
        return (
            f"scale {event.ephemeral_runner_set} to {event.desired_replicas} "
            f"({event.assigned_jobs} assigned jobs)"
        )
    if isinstance(event, ObjectWritten):
        return f"{event.action} {short_kind(event.kind)} {event.name}: {event.why}"
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


@dataclass
class _TailLine:
    when: str
    text: str
    count: int = 1

    def render(self) -> str:
        line = f"{self.when} {self.text}" if self.when else self.text
        return line if self.count == 1 else f"{line} (x{self.count})"


class EventTail:
    """The last lines of the feed, plus the parsed events the view model needs.

    A line whose text (all but its time) repeats one already in the tail is folded into it:
    the older copy goes, the newest stays at the bottom with a count (``(x7)``), so a decision
    repeated every few seconds takes one line and the history above it stays on screen.
    """

    def __init__(self, length: int = EVENT_TAIL_LENGTH) -> None:
        self._lines: deque[_TailLine] = deque(maxlen=length)
        self.assignments: list[EventBase] = []
        self.names: dict[int, str] = {}
        self.count = 0

    @property
    def lines(self) -> list[str]:
        return [line.render() for line in self._lines]

    def add(self, subject: str, data: bytes) -> None:
        self.count += 1
        try:
            event: EventBase | None = parse_event(data)
        except MalformedEventError:
            event = None
        if isinstance(event, ScaleSetAssigned):
            self.names[event.scale_set_id] = event.scale_set_name
        if isinstance(event, ScaleSetAssigned | ScaleSetDeleted):
            self.assignments.append(event)
        if event is None:
            self._append("", f"{subject} (unparsed)")
        else:
            when = event.occurred_at.strftime("%H:%M:%S")
            self._append(when, f"{event.source:<10} {_event_text(event, self.names)}")

    def _append(self, when: str, text: str) -> None:
        count = 1
        for line in list(self._lines):
            if line.text == text:
                count += line.count
                self._lines.remove(line)
        self._lines.append(_TailLine(when, text, count))


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
    scale_set_names: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    elapsed: float = 0.0,
    footer: Iterable[str] = (),
    sets: Iterable[Mapping[str, Any]] = (),
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
                scale_set_name=(scale_set_names or {}).get(variant, ""),
            )
        )
    return ViewModel(
        title=title,
        rows=rows,
        components=dict(components),
        events=list(events),
        notes=list(notes),
        phase=phase_of(progress or Progress()),
        elapsed=elapsed,
        footer=list(footer),
        sets=set_rows(sets),
    )


def footer_lines(
    *,
    env_file: str | None,
    nats_url: str | None,
    kubeconfig: str | None,
    sim_url: str | None,
    job_label: str | None,
) -> list[str]:
    """What to do next, one short line each (readable at 80 columns).

    With a connection file, the commands after ``then:`` are typed as shown in a second
    terminal once the file is sourced (it puts the virtualenv's ``bin`` on ``PATH``); without
    one, each line carries the setting it needs and ``arcflow`` by its full path."""
    lines = ["Ctrl-C stops everything."]
    if env_file:
        lines.append(f"other terminals: source {env_file}")
        then = ["arcflow audit"] if nats_url else []
        if kubeconfig:
            then.append("kubectl get ars,ers,pods -A")
        if then:
            lines.append("  then: " + "; ".join(then))
    else:
        import sysconfig  # only here: the rest of the view needs no interpreter paths

        arcflow = f"{sysconfig.get_path('scripts')}/arcflow"
        if nats_url:
            lines.append(f"audit: ARCFLOW_NATS_URL={nats_url} {arcflow} audit --follow")
        if kubeconfig:
            lines.append(f"kubectl: export KUBECONFIG={kubeconfig}")
    if sim_url and job_label:
        body = json.dumps({"labels": [job_label], "count": 3}, separators=(",", ":"))
        lines.append(f"more jobs: curl -d '{body}' {sim_url}/_sim/jobs")
    return lines


# --- rendering --------------------------------------------------------------------------------


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def _component_style(status: str) -> str:
    if status.startswith(("running", "ready")):
        return "green"
    if status.startswith(("starting", "disabled", "external", "applied", "restarting")):
        return "yellow"
    return "bold red"


def _restarts_of(status: str) -> str:
    """``1 restart`` out of ``running (pid 7, healthy, 1 restart)``."""
    inner = status.rpartition("(")[2].rstrip(")")
    last = inner.rpartition(", ")[2]
    return last if last.endswith(("restart", "restarts")) else ""


def _components_text(components: Mapping[str, str], width: int = 80) -> Text:
    """Healthy parts as ``name ok`` packed into lines (never split inside one part); any other
    part gets its own line with its status (details such as URLs are in the footer)."""
    text = Text()
    column = 0
    troubled: list[tuple[str, str]] = []
    for name, status in components.items():
        if not status.startswith(("running", "ready", "applied")):
            troubled.append((name, status))
            continue
        restarts = _restarts_of(status)
        ok = " ok" + (f" ({restarts})" if restarts else "")
        size = len(name) + len(ok)
        if column and column + 2 + size > width:
            text.append("\n")
            column = 0
        elif column:
            text.append("  ")
            column += 2
        text.append(name, style="bold")
        text.append(ok, style="green")
        column += size
    for name, status in troubled:
        if len(text):
            text.append("\n")
        text.append(f"{name}: ", style="bold")
        text.append(status, style=_component_style(status))
    return text


def _table(model: ViewModel) -> Table:
    table = Table(box=box.SIMPLE_HEAD, expand=False, pad_edge=False, show_edge=False)
    table.add_column("variant", no_wrap=True)
    table.add_column("scale set (id)", no_wrap=True)
    table.add_column("runners\nwant/now/busy", justify="right", no_wrap=True)
    table.add_column("jobs\nwait/run/done/fail", justify="right", no_wrap=True)
    for row in model.rows:
        if row.scale_set_id is None:
            scale_set = "registering..."
        else:
            scale_set = f"{row.scale_set_name or '?'} ({row.scale_set_id})"
        table.add_row(
            row.variant,
            scale_set,
            f"{_cell(row.desired)}/{row.current}/{row.busy}",
            f"{row.queued}/{row.running}/{row.done}/{row.failed}",
        )
    return table


def _sets_text(model: ViewModel) -> Text:
    """``sets:`` then one line per ARS in the cluster, its False conditions in red under it."""
    text = Text()
    if not model.sets:
        return text
    text.append("AutoscalingRunnerSets:", style="bold")
    for row in model.sets:
        style = "red" if row.problems else ("green" if row.phase == "Running" else "yellow")
        text.append(f"\n  {row.name}  ", style="bold")
        text.append(f"{row.phase}  {row.registered}/{row.variants} scale sets", style=style)
        for problem in row.problems:
            text.append(f"\n    {problem}", style="red")
    return text


def _head(model: ViewModel) -> Text:
    head = Text()
    head.append(model.title, style="bold")
    head.append("  ")
    head.append(model.phase.text, style=model.phase.style)
    head.append(f"  {elapsed_text(model.elapsed)}", style="dim")
    return head


def render(model: ViewModel, height: int | None = None, width: int | None = None) -> RenderableType:
    """The screen: phase line, table, components, notes, events, footer. With ``height`` (and
    ``width``), the event tail is cut from the top so everything fits: the footer and the
    newest events always show. Lines wrap at word boundaries, never mid-word."""
    top: list[RenderableType] = [
        _head(model),
        _table(model),
        _components_text(model.components, width or 80),
    ]
    if model.sets:
        top.append(_sets_text(model))
    top.extend(Text(note, style="yellow") for note in model.notes)
    footer = [Text(line, style="dim") for line in model.footer]
    events = [Text(line, overflow="fold") for line in model.events]
    label = Text("events (latest last, repeats folded):", style="bold")
    if height is None:
        return Group(*top, label, *events, *footer)
    measure = Console(width=width or 80, height=height, color_system=None, file=io.StringIO())
    used = sum(_lines(measure, part) for part in (*top, label, *footer))
    room = height - used - 1  # Live keeps the cursor on a last line
    shown: list[Text] = []
    for event in reversed(events):
        need = _lines(measure, event)
        if need > room:
            break
        room -= need
        shown.insert(0, event)
    return Group(*top, label, *shown, *footer)


def _lines(console: Console, renderable: RenderableType) -> int:
    return len(console.render_lines(renderable, console.options, pad=False))
