"""The event flow, built from every service's declared spec: each consumed event type has a
producer, every resource the services route on is watched, and docs/events.md shows the table.

Set ``ARCFLOW_UPDATE_DOCS=1`` to rewrite the table in docs/events.md from the specs.
"""

from __future__ import annotations

import os
from pathlib import Path

from arcflow.common.events import JobsBatch, ScaleDecision
from arcflow.common.kube.resources import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from arcflow.common.service.flow import (
    FlowNode,
    flow_problems,
    flow_table,
    node_of,
    render_controllers_markdown,
    render_markdown,
    render_rpc_markdown,
)
from arcflow.listener.service import SERVICE as LISTENER
from arcflow.reconciler.cache import CACHED_KINDS
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.registrar.service import SERVICE as REGISTRAR
from arcflow.watcher.service import SERVICE as WATCHER
from arcflow.watcher.watchers import WATCHED_RESOURCES

EVENTS_DOC = Path(__file__).parents[2] / "docs" / "events.md"
START, END = "<!-- flow-table:start -->", "<!-- flow-table:end -->"
RPC_START, RPC_END = "<!-- rpc-table:start -->", "<!-- rpc-table:end -->"
CTL_START, CTL_END = "<!-- controllers-table:start -->", "<!-- controllers-table:end -->"
SPECS = (WATCHER, REGISTRAR, RECONCILER, LISTENER)

#: `arcflow audit` and any third party: read everything, produce nothing.
AUDITORS = FlowNode(
    "auditors",
    consumes=frozenset(
        {
            "k8s.object.changed",
            "object.written",
            "runner.lifecycle",
            "spec.invalid",
            "registration.failed",
            "session.failed",
            "scale.decision",
            "deadletter",
            # The listener's durable record of each GitHub message (ADR 0104: read by no
            # service, there for audits and replays).
            "jobs.batch",
        }
    ),
    publishes=frozenset(),
)


def nodes() -> list[FlowNode]:
    return [node_of(s) for s in SPECS] + [AUDITORS]


def test_every_consumed_event_type_has_a_producer() -> None:
    rows = flow_table(nodes())
    assert flow_problems(rows) == []
    assert {r.event_type for r in rows} >= {"k8s.object.changed", "scaleset.assigned"}
    assert JobsBatch.model_fields["type"].default in {r.event_type for r in rows}
    assert ScaleDecision.model_fields["type"].default in {r.event_type for r in rows}


def test_a_consumer_without_producer_is_reported() -> None:
    orphan = FlowNode("lonely", consumes=frozenset({"nobody.makes.this"}), publishes=frozenset())
    assert flow_problems(flow_table([*nodes(), orphan])) == [
        "nobody.makes.this is consumed by lonely but produced by nobody"
    ]


def test_every_routed_resource_is_watched() -> None:
    """The reconciler routes the changes of its own watch-fed cache only (ADR 0069); the
    registrar converges on the watcher's events of ARSs and ERSs."""
    assert not DECLARED.routed_kinds - {kind.resource.kind for kind in CACHED_KINDS}
    registrar_routes = {AUTOSCALING_RUNNER_SET.plural, EPHEMERAL_RUNNER_SET.plural}
    assert not registrar_routes - WATCHED_RESOURCES


def test_every_subscription_filter_matches_what_the_watcher_or_registrar_publishes() -> None:
    for spec in (REGISTRAR, RECONCILER):
        for subscription in spec.subscriptions:
            token = subscription.consumer.filter_subject.split(".")[1]
            assert token in {"k8s", "scalesets", "errors"}, subscription.consumer.durable
    assert all(s.consumer.stream != "ARC_K8S" for s in RECONCILER.subscriptions)


def _between(text: str, start: str, end: str, body: str) -> str:
    assert start in text, f"docs/events.md lost its {start} marker"
    assert end in text, f"docs/events.md lost its {end} marker"
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}{end}{tail}"


def test_docs_events_md_shows_the_generated_tables() -> None:
    """The event flow table, the controllers table and the request/reply table, all from the
    specs."""
    text = EVENTS_DOC.read_text()
    wanted = _between(text, START, END, render_markdown(flow_table(nodes())))
    wanted = _between(wanted, CTL_START, CTL_END, render_controllers_markdown(SPECS))
    wanted = _between(wanted, RPC_START, RPC_END, render_rpc_markdown(SPECS))
    if os.environ.get("ARCFLOW_UPDATE_DOCS") == "1":
        EVENTS_DOC.write_text(wanted)
    assert text == wanted, "run ARCFLOW_UPDATE_DOCS=1 pytest tests/flow to regenerate"


def test_every_rpc_endpoint_is_in_the_asyncapi_document() -> None:
    import json

    doc = json.loads((Path(__file__).parents[2] / "docs" / "asyncapi.json").read_text())
    addresses = {c["address"] for c in doc["channels"].values()}
    declared = {e.subject for spec in SPECS for e in spec.rpc}
    assert len(declared) == 5
    assert declared <= addresses


def test_docs_asyncapi_json_is_generated_from_the_specs() -> None:
    from scripts.generate_asyncapi import render

    doc = Path(__file__).parents[2] / "docs" / "asyncapi.json"
    assert doc.read_text() == render(), "run .venv/bin/python scripts/generate_asyncapi.py"
