"""``arcflow audit`` against a real nats-server: filters, replay starts, jsonl, follow."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import nats
import pytest
from click.testing import CliRunner

from arcflow.cli.audit import (
    AuditInputError,
    KeyFilter,
    build_request,
    format_human,
    parse_since,
    plan_sources,
)
from arcflow.cli.main import cli
from arcflow.common import subjects
from arcflow.common.events import (
    EventBase,
    EventKeys,
    ObjectWritten,
    ScaleDecision,
    SpecInvalid,
    SpecIssue,
    parse_event,
)
from arcflow.common.nats import ensure_jetstream, publish_event
from arcflow.devstack.nats_server import NatsServer

# --- pure parts --------------------------------------------------------------------------


def test_plan_sources_narrows_by_keys_and_never_touches_rpc() -> None:
    sources = plan_sources("all", KeyFilter(namespace="arc", ars="big", variant="gpu"))
    filters = {s.stream: s.filter_subject for s in sources}
    assert filters["ARC_JOBS"] == "arc.jobs.arc.big.gpu"
    assert filters["ARC_AUDIT"] == "arc.audit.arc.big.gpu"
    assert "ARC_K8S" not in filters
    assert "ARC_ERRORS" not in filters
    assert all(not s.filter_subject.startswith("arc.rpc") for s in sources)
    assert plan_sources("errors", KeyFilter(ars="big"))[0].filter_subject == "arc.errors.*.big"
    with pytest.raises(AuditInputError, match="--variant does not apply"):
        plan_sources("k8s", KeyFilter(variant="gpu"))


def test_parse_since_accepts_durations_and_rfc3339() -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_since("15m", now) == now - timedelta(minutes=15)
    assert parse_since("2025-01-01T00:00:00Z") == datetime(2025, 1, 1, tzinfo=UTC)
    with pytest.raises(AuditInputError, match="neither a duration"):
        parse_since("yesterday")
    with pytest.raises(AuditInputError, match="no time zone"):
        parse_since("2025-01-01T00:00:00")


def test_start_options_exclude_each_other_and_from_seq_needs_one_stream() -> None:
    common = {"namespace": None, "ars": None, "variant": None, "types": (), "limit": None}
    with pytest.raises(AuditInputError, match="exclude each other"):
        build_request(domain="jobs", since="1m", from_seq=3, new=False, follow=None, **common)
    with pytest.raises(AuditInputError, match="pick one --domain"):
        build_request(domain="all", since=None, from_seq=3, new=False, follow=None, **common)
    assert build_request(
        domain="jobs", since=None, from_seq=None, new=True, follow=None, **common
    ).follow


def test_human_line_has_time_type_keys_and_summary() -> None:
    event = _decision("arc", "big", "gpu", 3)
    line = format_human(subjects.scale_subject("arc", "big", "gpu"), event)
    assert line.startswith(event.occurred_at.strftime("%Y-%m-%dT%H:%M:%S"))
    assert "scale.decision" in line
    assert "arc/big/gpu" in line
    assert "big-gpu -> 3" in line


# --- against a real nats-server ---------------------------------------------------------


def _decision(namespace: str, ars: str, variant: str, replicas: int) -> ScaleDecision:
    ers = f"{ars}-{variant}" if variant else ars
    return ScaleDecision(
        source="listener",
        keys=EventKeys(namespace=namespace, ars=ars, variant=variant, scale_set_id=7),
        scale_set_id=7,
        ephemeral_runner_set=ers,
        desired_replicas=replicas,
        patch_id=replicas,
        assigned_jobs=replicas,
        min_runners=0,
        max_runners=10,
        reason="test",
    )


def _written(namespace: str, ars: str, variant: str, name: str) -> ObjectWritten:
    return ObjectWritten(
        source="reconciler",
        keys=EventKeys(namespace=namespace, ars=ars, variant=variant),
        action="created",
        kind="EphemeralRunnerSet",
        namespace=namespace,
        name=name,
        why="missing",
        ars=ars,
        variant=variant,
    )


def _invalid(namespace: str, ars: str) -> SpecInvalid:
    return SpecInvalid(
        source="reconciler",
        keys=EventKeys(namespace=namespace, ars=ars),
        generation=2,
        errors=[SpecIssue(path="spec.maxRunners", message="is -1")],
    )


def _subject_of(event: EventBase) -> str:
    keys = event.keys
    assert keys.namespace is not None
    assert keys.ars is not None
    if isinstance(event, ScaleDecision):
        return subjects.scale_subject(keys.namespace, keys.ars, keys.variant or "")
    if isinstance(event, ObjectWritten):
        return subjects.audit_subject(keys.namespace, keys.ars, keys.variant or "")
    return subjects.errors_subject(keys.namespace, keys.ars)


async def _publish(
    url: str, events: list[EventBase], raw: list[tuple[str, bytes]] | None = None
) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await ensure_jetstream(js)
        for event in events:
            await publish_event(js, _subject_of(event), event)
        for subject, payload in raw or []:
            await js.publish(subject, payload, stream=None)
    finally:
        await nc.drain()


FIRST: list[EventBase] = [
    _decision("arc", "big", "gpu", 1),
    _decision("arc", "big", "", 2),
    _decision("other", "big", "gpu", 3),
    _written("arc", "big", "gpu", "big-gpu"),
    _written("arc", "small", "", "small"),
    _invalid("arc", "big"),
]
SECOND: list[EventBase] = [_decision("arc", "big", "gpu", 4), _written("arc", "big", "cpu", "x")]


@pytest.fixture
def stocked_server(private_nats_server: NatsServer) -> tuple[str, datetime]:
    """A server holding FIRST, then (after a recorded instant) SECOND, plus one bad message."""
    url = private_nats_server.url
    asyncio.run(_publish(url, FIRST, [("arc.scale.arc.big.gpu", b"{not json")]))
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    asyncio.run(_publish(url, SECOND))
    return url, between


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _jsonl(stdout: str) -> list[EventBase]:
    return [parse_event(line) for line in stdout.splitlines() if line.strip()]


@pytest.mark.integration
def test_filters_by_namespace_ars_variant_and_type(stocked_server: tuple[str, datetime]) -> None:
    url, _ = stocked_server
    code, out, err = _run("--nats-url", url, "--namespace", "arc", "--ars", "big", "-o", "jsonl")
    assert code == 0, err
    ids = [e.id for e in _jsonl(out)]
    expected = [
        e.id for e in [*FIRST, *SECOND] if e.keys.namespace == "arc" and e.keys.ars == "big"
    ]
    assert sorted(ids) == sorted(expected)

    code, out, _ = _run("--nats-url", url, "--variant", "gpu", "--domain", "scale", "-o", "jsonl")
    assert [e.id for e in _jsonl(out)] == [FIRST[0].id, FIRST[2].id, SECOND[0].id]

    code, out, _ = _run("--nats-url", url, "--type", "spec.invalid", "--type", "object.written")
    lines = out.splitlines()
    assert len(lines) == 4
    assert sum("spec.invalid" in line for line in lines) == 1
    assert any("spec.maxRunners: is -1" in line for line in lines)


@pytest.mark.integration
def test_jsonl_round_trips_and_malformed_is_warned(stocked_server: tuple[str, datetime]) -> None:
    url, _ = stocked_server
    code, out, err = _run("--nats-url", url, "--domain", "scale", "-o", "jsonl")
    assert code == 0
    by_id = {e.id: e for e in [*FIRST, *SECOND]}
    decoded = _jsonl(out)
    assert len(decoded) == 4
    for event in decoded:
        original = by_id[event.id]
        assert event.model_dump(exclude={"trace"}) == original.model_dump(exclude={"trace"})
    assert "warning:" in err
    assert "ARC_SCALE seq 4" in err
    assert "skipped" in err


@pytest.mark.integration
def test_replay_from_sequence_and_from_time(stocked_server: tuple[str, datetime]) -> None:
    url, between = stocked_server
    # ARC_SCALE holds: 1,2,3 (FIRST decisions), 4 (malformed), 5 (SECOND decision).
    code, out, _ = _run("--nats-url", url, "--domain", "scale", "--from-seq", "3", "-o", "jsonl")
    assert code == 0
    assert [e.id for e in _jsonl(out)] == [FIRST[2].id, SECOND[0].id]

    code, out, _ = _run("--nats-url", url, "--since", between.isoformat(), "-o", "jsonl")
    assert sorted(e.id for e in _jsonl(out)) == sorted(e.id for e in SECOND)

    code, out, _ = _run("--nats-url", url, "--since", "1h", "--limit", "2", "-o", "jsonl")
    assert len(_jsonl(out)) == 2


@pytest.mark.integration
def test_follow_picks_up_a_new_event_then_stops_on_limit(
    stocked_server: tuple[str, datetime],
) -> None:
    url, _ = stocked_server
    env = {**os.environ, "ARCFLOW_NATS_URL": url}
    command = [sys.executable, "-m", "arcflow.cli.main", "audit", "--domain", "errors"]
    proc = subprocess.Popen(
        [*command, "--follow", "--limit", "2", "-o", "jsonl"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = parse_event(proc.stdout.readline())  # the backlog: one spec.invalid
        assert first.id == FIRST[5].id
        late = _invalid("arc", "late")
        asyncio.run(_publish(url, [late]))
        second = parse_event(proc.stdout.readline())
        assert second.id == late.id
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.integration
def test_unreachable_server_is_a_clear_error() -> None:
    code, _, err = _run("--nats-url", "nats://127.0.0.1:1", "--domain", "jobs")
    assert code == 1
    assert "cannot reach NATS at nats://127.0.0.1:1" in err
