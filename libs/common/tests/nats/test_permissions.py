"""The generated NATS permissions: who may publish and subscribe to what (pure checks)."""

from __future__ import annotations

import json

import pytest

from arcflow.common import subjects
from arcflow.common.nats import (
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    STREAMS,
)
from arcflow.common.nats.permissions import (
    REGISTRAR_RPC_QUEUE,
    SERVICE_PERMISSIONS,
    SERVICES,
    Permissions,
    default_users,
    inbox_subscription,
    password_placeholder,
    permissions_json,
    render_nats_authorization,
    subject_matches,
)

RPC = [
    subjects.registrar_rpc_subject(op)
    for op in ("jitconfig", "remove-runner", "get-runner", "list-runners")
]
DATA = {
    "watcher": subjects.k8s_subject("pods", "ns", "p"),
    "registrar": subjects.scalesets_subject("ns", "ars"),
    "listener": subjects.jobs_subject("ns", "ars", "gpu"),
    "reconciler": subjects.audit_subject("ns", "ars"),
}


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        ("arc.k8s.>", "arc.k8s.pods.ns.p", True),
        ("arc.k8s.>", "arc.k8s", False),
        ("arc.rpc.registrar.*", "arc.rpc.registrar.jitconfig", True),
        ("arc.rpc.registrar.*", "arc.rpc.registrar.a.b", False),
        ("arc.rpc.registrar.*", "arc.rpc.>", False),
        ("_INBOX.>", "arc.rpc.>", False),
        ("$JS.API.INFO", "$JS.API.INFO", True),
        ("$JS.API.INFO", "$JS.API.INFO.X", False),
    ],
)
def test_subject_matching_follows_nats_tokens(pattern: str, subject: str, expected: bool) -> None:
    assert subject_matches(pattern, subject) is expected


def test_every_service_is_described() -> None:
    assert tuple(SERVICE_PERMISSIONS) == SERVICES
    for perms in SERVICE_PERMISSIONS.values():
        assert perms.may_publish("$JS.API.INFO")
        assert perms.subscribe.count(inbox_subscription(perms.service)) == 1
        assert perms.why
        assert len(set(perms.publish)) == len(perms.publish)


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_may_read_only_its_own_inbox(service: str) -> None:
    """No shared ``_INBOX.>``: a user reads its own replies, never another service's."""
    perms = SERVICE_PERMISSIONS[service]
    assert perms.may_subscribe(f"_INBOX_{service}.abc.*")
    assert perms.may_subscribe(f"_INBOX_{service}.>")
    assert not perms.may_subscribe("_INBOX.>")
    assert not perms.may_subscribe("_INBOX.abc")
    for other in SERVICES:
        if other != service:
            assert not perms.may_subscribe(f"_INBOX_{other}.>")
            assert not perms.may_subscribe(f"_INBOX_{other}.abc")
    assert not perms.may_subscribe(">")


@pytest.mark.parametrize("service", SERVICES)
def test_each_data_domain_has_exactly_its_producer(service: str) -> None:
    perms = SERVICE_PERMISSIONS[service]
    for owner, subject in DATA.items():
        assert perms.may_publish(subject) is (owner == service), (service, subject)


def test_listener_publishes_scale_decisions_and_only_consumers_publish_dead_letters() -> None:
    scale = subjects.scale_subject("ns", "ars")
    assert [s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(scale)] == ["listener"]
    dlq = subjects.dlq_subject(DATA["listener"])
    producers = {s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(dlq)}
    assert producers == {"registrar", "reconciler"}  # the listener consumes nothing (ADR 0104)


def test_only_the_reconciler_calls_the_registrar_and_only_the_registrar_serves() -> None:
    for subject in RPC:
        callers = [s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(subject)]
        assert callers == ["reconciler"]
        servers = [
            s
            for s, p in SERVICE_PERMISSIONS.items()
            if p.may_subscribe(subject, queue=REGISTRAR_RPC_QUEUE)
        ]
        assert servers == ["registrar"]
        assert not any(p.may_subscribe(subject) for p in SERVICE_PERMISSIONS.values())
    assert [s for s, p in SERVICE_PERMISSIONS.items() if p.allow_responses] == ["registrar"]


def test_nobody_subscribes_to_data_or_rpc_wildcards() -> None:
    for perms in SERVICE_PERMISSIONS.values():
        assert not perms.may_subscribe("arc.rpc.>")
        assert not perms.may_subscribe("arc.>")
        assert not perms.may_subscribe(DATA["watcher"])


def test_durables_are_usable_only_by_their_owner() -> None:
    owners = {
        CONSUMER_REGISTRAR_ARS: "registrar",
        CONSUMER_RECONCILER_SCALESETS: "reconciler",
    }
    for spec, owner in owners.items():
        fetch = f"$JS.API.CONSUMER.MSG.NEXT.{spec.stream}.{spec.durable}"
        ack = f"$JS.ACK.{spec.stream}.{spec.durable}.1.2.3.4.5"
        fetchers = {s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(fetch)}
        assert fetchers - {"auditor"} == {owner}
        assert {s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(ack)} == {owner}


def test_auditor_is_read_only() -> None:
    auditor = SERVICE_PERMISSIONS["auditor"]
    for entry in auditor.publish:
        assert entry.startswith(("$JS.API.", "$JS.FC.")), entry
        assert ".STREAM.CREATE." not in entry
        assert ".STREAM.UPDATE." not in entry
        assert ".DELETE." not in entry
    for spec in STREAMS:
        # ephemeral push consumers only: no named consumer, no pull, no ack, no info
        assert auditor.may_publish(f"$JS.API.CONSUMER.CREATE.{spec.name}")
        assert not auditor.may_publish(f"$JS.API.CONSUMER.CREATE.{spec.name}.abc123")
        assert not auditor.may_publish(f"$JS.API.CONSUMER.DURABLE.CREATE.{spec.name}.abc")
        assert not auditor.may_publish(f"$JS.API.CONSUMER.MSG.NEXT.{spec.name}.abc123")
        assert not auditor.may_publish(f"$JS.API.CONSUMER.INFO.{spec.name}.abc123")
        assert not auditor.may_publish(f"$JS.ACK.{spec.name}.c.1.1.1.1.1")
    assert not auditor.allow_responses


def test_each_service_creates_and_pulls_only_its_own_durables() -> None:
    owned = {
        "registrar": {("ARC_K8S", "registrar-ars"), ("ARC_K8S", "registrar-ers")},
        "reconciler": {
            ("ARC_SCALESETS", "reconciler-scalesets"),
            ("ARC_ERRORS", "reconciler-errors"),
        },
        # durables consumed before ADR 0069 (reconciler) and ADR 0104 (listener): nobody now
        "nobody": {("ARC_K8S", "reconciler-k8s"), ("ARC_JOBS", "listener-jobs-abc")},
    }
    every = {durable for durables in owned.values() for durable in durables}
    for service, perms in SERVICE_PERMISSIONS.items():
        for stream, durable in every:
            mine = (stream, durable) in owned.get(service, set())
            for subject in (
                f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
                f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
                f"$JS.ACK.{stream}.{durable}.1.1.1.1.0",
            ):
                assert perms.may_publish(subject) is mine, (service, subject)


def test_only_layout_owners_declare_streams() -> None:
    create = "$JS.API.STREAM.CREATE.ARC_K8S"
    declarers = {s for s, p in SERVICE_PERMISSIONS.items() if p.may_publish(create)}
    assert declarers == {"watcher", "registrar", "reconciler"}
    listener = SERVICE_PERMISSIONS["listener"]
    assert listener.may_publish("$JS.API.STREAM.CREATE.ARC_JOBS")
    assert not listener.may_publish("$JS.API.STREAM.CREATE.ARC_AUDIT")
    for perms in SERVICE_PERMISSIONS.values():
        assert not perms.may_publish("$JS.API.STREAM.DELETE.ARC_K8S")
        assert not perms.may_publish("$JS.API.STREAM.PURGE.ARC_K8S")


def test_render_uses_env_placeholders_and_quotes_literal_passwords() -> None:
    text = render_nats_authorization(default_users())
    for service in SERVICES:
        assert f"password: {password_placeholder(service)}\n" in text
        assert f'user: "arcflow-{service}"' in text
    assert text.count("allow_responses: true") == 1
    literal = render_nats_authorization({"watcher": ("w", 'p"w')})
    assert 'password: "p\\"w"' in literal


def test_render_and_json_reject_an_unknown_service() -> None:
    with pytest.raises(ValueError, match="'gateway'"):
        render_nats_authorization({"gateway": ("g", "$X")})
    with pytest.raises(ValueError, match="gateway"):
        permissions_json(["gateway"])


def test_json_round_trips_the_lists() -> None:
    data = json.loads(permissions_json(["registrar"]))
    assert list(data) == ["registrar"]
    assert data["registrar"]["publish"]["allow"] == list(SERVICE_PERMISSIONS["registrar"].publish)
    assert data["registrar"]["allow_responses"] is True


def test_queue_entries_restrict_the_queue() -> None:
    perms = Permissions("x", publish=(), subscribe=("a.b q",))
    assert perms.may_subscribe("a.b", queue="q")
    assert not perms.may_subscribe("a.b")
    assert not perms.may_subscribe("a.b", queue="other")
