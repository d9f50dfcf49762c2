"""The event flow as data: which service produces each event type and which consumes it.

Built from the declared :class:`~arcflow.common.service.spec.ServiceSpec` of every service
(plus :class:`FlowNode` entries for roles that are not services, such as auditors); the table
in docs/events.md is rendered from it and a test keeps the two equal. The request/reply
table of the same page is rendered from the specs' declared RPC endpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from arcflow.common.service.spec import ServiceSpec


@dataclass(frozen=True, slots=True)
class FlowNode:
    """One producer/consumer of events: a service, or a role such as "auditors"."""

    name: str
    consumes: frozenset[str]
    publishes: frozenset[str]
    #: event type -> subject pattern, for the types it publishes
    subjects: tuple[tuple[str, str], ...] = ()
    #: (event type, controller key kind): the consumed events that wake a declared controller
    wakes: tuple[tuple[str, str], ...] = ()


def node_of(spec: ServiceSpec[Any]) -> FlowNode:
    """The flow node a service spec declares (every consumer also publishes dead letters)."""
    subjects = tuple((_type(t), p.subject) for p in spec.publishes for t in p.event_types)
    publishes = set(spec.published_types)
    if spec.subscriptions:  # the settle policy dead-letters what none can process
        publishes.add("deadletter")
        subjects += (("deadletter", "arc.dlq.<original subject>"),)
    wakes: tuple[tuple[str, str], ...] = ()
    if spec.controllers is not None:
        wakes = tuple(
            (_type(t), c.kind)
            for c in spec.controllers.controllers
            for source in c.events
            for t in source.event_types
        )
    return FlowNode(
        spec.name, frozenset(spec.consumed_types), frozenset(publishes), subjects, wakes
    )


def _type(event_type: Any) -> str:
    return str(event_type.model_fields["type"].default)


def _consumer(node: FlowNode, event_type: str) -> str:
    """A consumer's name, with the controllers the event wakes (``reconciler (wakes ars)``)."""
    kinds = [kind for t, kind in node.wakes if t == event_type]
    return f"{node.name} (wakes {', '.join(kinds)})" if kinds else node.name


@dataclass(frozen=True, slots=True)
class FlowRow:
    event_type: str
    subjects: tuple[str, ...]
    producers: tuple[str, ...]
    consumers: tuple[str, ...]


def flow_table(nodes: Iterable[FlowNode]) -> list[FlowRow]:
    """One row per event type that anyone produces or consumes, sorted by type."""
    nodes = list(nodes)
    types = sorted({t for n in nodes for t in n.consumes | n.publishes})
    rows = []
    for event_type in types:
        subjects = sorted({s for n in nodes for t, s in n.subjects if t == event_type})
        rows.append(
            FlowRow(
                event_type,
                tuple(subjects),
                tuple(sorted(n.name for n in nodes if event_type in n.publishes)),
                tuple(sorted(_consumer(n, event_type) for n in nodes if event_type in n.consumes)),
            )
        )
    return rows


def flow_problems(rows: Sequence[FlowRow]) -> list[str]:
    """Consumed types nobody produces (a consumer waiting forever)."""
    return [
        f"{row.event_type} is consumed by {', '.join(row.consumers)} but produced by nobody"
        for row in rows
        if row.consumers and not row.producers
    ]


def render_markdown(rows: Sequence[FlowRow]) -> str:
    """The producer/consumer table of docs/events.md."""
    lines = [
        "| Event type | Subject | Producers | Consumers |",
        "|---|---|---|---|",
    ]
    for row in rows:
        subjects = ", ".join(f"`{s}`" for s in row.subjects) or "-"
        lines.append(
            f"| `{row.event_type}` | {subjects} | {', '.join(row.producers) or '-'} | "
            f"{', '.join(row.consumers) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def render_rpc_markdown(specs: Iterable[ServiceSpec[Any]]) -> str:
    """The request/reply table of docs/events.md: every RPC endpoint a spec declares."""
    lines = [
        "| Subject | Request | Reply | Served by | What for |",
        "|---|---|---|---|---|",
    ]
    for spec in specs:
        for endpoint in spec.rpc:
            secret = " **The reply carries a credential.**" if endpoint.carries_secret else ""
            lines.append(
                f"| `{endpoint.subject}` | `{endpoint.request.__name__}` | "
                f"`{endpoint.reply.__name__}` | {spec.name} | {endpoint.description}.{secret} |"
            )
    return "\n".join(lines) + "\n"


def render_controllers_markdown(specs: Iterable[ServiceSpec[Any]]) -> str:
    """The controllers table of docs/events.md: each declared controller and what wakes it
    (ADR 0095)."""
    lines = [
        "| Service | Key | Reconciles | Owns (by ownerReference) | Also woken by | Events "
        "| State |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in specs:
        if spec.controllers is None:
            continue
        for c in spec.controllers.controllers:
            owns = ", ".join(c.owns) or "-"
            if c.owns and c.owned_settle_seconds:
                owns += f" (settles {c.owned_settle_seconds:g} s)"
            watches = (
                "; ".join(
                    f"{w.kind}: {w.how}"
                    + (f" (settles {w.settle_seconds:g} s)" if w.settle_seconds else "")
                    for w in c.watches
                )
                or "-"
            )
            events = ", ".join(
                f"`{_type(t)}`" + (" (kept)" if source.keep is not None else "")
                for source in c.events
                for t in source.event_types
            )
            state = ", ".join(cls.__name__ for cls in c.state) or "-"
            lines.append(
                f"| {spec.name} | `{c.kind}` | {c.resource.kind} (`{c.model_name}`) | {owns} | "
                f"{watches} | {events or '-'} | {state} |"
            )
    return "\n".join(lines) + "\n"
