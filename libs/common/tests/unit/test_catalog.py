"""Event envelope, typed models, parse_event errors and Nats-Msg-Id rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from arcflow.common.events import (
    EVENT_REGISTRY,
    EVENT_TYPES,
    DeadLetter,
    EventKeys,
    JobInfo,
    JobsBatch,
    JobStatistics,
    K8sObjectChanged,
    MalformedEventError,
    ScaleDecision,
    SpecInvalid,
    SpecIssue,
    TraceContext,
    encode_event,
    msg_id,
    parse_event,
)


def _change(change: str = "MODIFIED", rv: str = "42") -> K8sObjectChanged:
    return K8sObjectChanged(
        source="watcher",
        keys=EventKeys(namespace="arc", ars="big"),
        api_version="actions.github.com/v1alpha1",
        kind="AutoscalingRunnerSet",
        resource="autoscalingrunnersets",
        namespace="arc",
        name="big",
        uid="u-1",
        change=change,  # type: ignore[arg-type]
        resource_version=rv,
        generation=3,
        labels={"app": "x"},
    )


def test_round_trip_keeps_type_and_fields() -> None:
    event = _change()
    parsed = parse_event(encode_event(event))
    assert isinstance(parsed, K8sObjectChanged)
    assert parsed == event
    assert parsed.occurred_at.tzinfo is not None
    assert parsed.schema_version == 1
    assert len(parsed.id) == 36


def test_every_registered_type_has_a_unique_literal() -> None:
    assert len(EVENT_REGISTRY) == len(EVENT_TYPES) == 12
    assert set(EVENT_REGISTRY) >= {
        "k8s.object.changed",
        "scaleset.assigned",
        "scaleset.deleted",
        "registration.failed",
        "spec.invalid",
        "jobs.batch",
        "scale.decision",
        "object.written",
        "runner.lifecycle",
        "deadletter",
    }


def test_occurred_at_is_normalised_to_utc_and_naive_is_rejected() -> None:
    plus2 = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    event = ScaleDecision(
        source="listener",
        occurred_at=plus2,
        scale_set_id=1,
        ephemeral_runner_set="ers",
        desired_replicas=2,
        patch_id=1,
        assigned_jobs=2,
        min_runners=0,
        max_runners=5,
    )
    assert event.occurred_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    raw = json.loads(encode_event(event))
    raw["occurred_at"] = "2026-01-01T10:00:00"
    with pytest.raises(MalformedEventError, match="occurred_at"):
        parse_event(json.dumps(raw))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"source": "x"}', "no string 'type'"),
        (b'{"type": "k8s.object.exploded", "source": "x"}', "unknown event type"),
    ],
)
def test_bad_bytes_raise_malformed_event_error(data: bytes, match: str) -> None:
    with pytest.raises(MalformedEventError, match=match):
        parse_event(data)


def test_missing_and_wrong_fields_are_named_without_values() -> None:
    raw = json.loads(encode_event(_change()))
    del raw["uid"]
    raw["change"] = "ghp_" + "A" * 36
    with pytest.raises(MalformedEventError) as info:
        parse_event(json.dumps(raw))
    text = str(info.value)
    assert "invalid k8s.object.changed event" in text
    assert "uid: Field required" in text
    assert "change:" in text
    assert "ghp_" not in text  # the offending value is never echoed


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    raw = json.loads(encode_event(_change()))
    raw["added_in_v2"] = {"x": 1}
    assert isinstance(parse_event(json.dumps(raw)), K8sObjectChanged)


def test_msg_id_is_deterministic_for_facts_and_random_otherwise() -> None:
    a, b = _change(), _change()
    assert a.id != b.id
    assert msg_id(a) == msg_id(b) == "k8s.object.changed:u-1:42:MODIFIED"
    assert msg_id(_change(rv="43")) != msg_id(a)
    assert msg_id(_change("DELETED")) != msg_id(a)
    resync1, resync2 = _change("RESYNC"), _change("RESYNC")
    assert msg_id(resync1) == resync1.id != msg_id(resync2)
    batch = JobsBatch(
        source="listener",
        scale_set_id=7,
        message_id=100015779,
        statistics=JobStatistics(total_assigned_jobs=2),
        jobs=[JobInfo(message_type="JobAssigned", job_id="j1")],
    )
    assert msg_id(batch) == "jobs.batch:7:100015779"


def test_models_have_no_place_for_secrets() -> None:
    """No event schema has a field whose name suggests a secret or an object body."""
    forbidden = ("token", "password", "secret", "jit", "private", "spec", "data", "annotations")
    for cls in EVENT_TYPES:
        props = _all_property_names(cls.model_json_schema())
        for name in props:
            assert not any(word in name.lower() for word in forbidden), (cls.__name__, name)


def _all_property_names(schema: dict[str, object]) -> set[str]:
    names: set[str] = set()
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(props)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def test_spec_invalid_requires_errors_and_trace_round_trips() -> None:
    with pytest.raises(ValueError, match="errors"):
        SpecInvalid(source="reconciler", errors=[])
    event = SpecInvalid(
        source="reconciler",
        errors=[SpecIssue(path="spec.runnerVariants[1].name", message="duplicate")],
        trace=TraceContext(traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"),
    )
    parsed = parse_event(encode_event(event))
    assert parsed == event


def test_dead_letter_model_validates_counts() -> None:
    with pytest.raises(ValueError, match="delivery_count"):
        DeadLetter(
            source="x",
            original_subject="arc.jobs.a.b._",
            reason="r",
            delivery_count=-1,
            payload="",
            payload_size=0,
        )
