"""Resource paths, registry lookups, error mapping, events and the token bucket (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    NAMESPACE,
    POD,
    REGISTRY,
    ROLE,
    ConflictError,
    InvalidError,
    KubeApiError,
    NotFoundError,
    ResourceVersionExpired,
    TokenBucket,
    build_event,
    error_from_status,
)


def test_paths() -> None:
    assert AUTOSCALING_RUNNER_SET.path("ns") == (
        "/apis/actions.github.com/v1alpha1/namespaces/ns/autoscalingrunnersets"
    )
    assert (
        AUTOSCALING_RUNNER_SET.path() == "/apis/actions.github.com/v1alpha1/autoscalingrunnersets"
    )
    assert POD.path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert NAMESPACE.path(None, "arc") == "/api/v1/namespaces/arc"
    assert ROLE.path("a b", "r") == "/apis/rbac.authorization.k8s.io/v1/namespaces/a%20b/roles/r"


def test_path_needs_namespace_for_named_objects() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        POD.path(None, "p")


def test_registry_lookups() -> None:
    assert REGISTRY.by_kind("Pod") is POD
    manifest = {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet"}
    assert REGISTRY.for_manifest(manifest) is AUTOSCALING_RUNNER_SET
    with pytest.raises(KeyError, match="unknown kind"):
        REGISTRY.for_manifest({"apiVersion": "v2", "kind": "Pod"})
    with pytest.raises(ValueError, match="apiVersion"):
        REGISTRY.for_manifest({"kind": "Pod"})


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (404, "NotFound", NotFoundError),
        (409, "AlreadyExists", ConflictError),
        (409, "Conflict", ConflictError),
        (422, "Invalid", InvalidError),
        (410, "Expired", ResourceVersionExpired),
        (500, "InternalError", KubeApiError),
    ],
)
def test_error_mapping(status: int, reason: str, cls: type[KubeApiError]) -> None:
    error = error_from_status(
        status, {"kind": "Status", "code": status, "reason": reason, "message": "m"}
    )
    assert type(error) is cls
    assert error.status == status
    if isinstance(error, ConflictError):
        assert error.already_exists is (reason == "AlreadyExists")


def test_error_without_status_body() -> None:
    error = error_from_status(503, None)
    assert error.status == 503
    assert "503" in str(error)


def test_build_event() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
    }
    event = build_event(
        obj, "Started", "x" * 5000, type="Warning", now=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"].startswith("p.")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "7",
    }
    assert len(event["message"]) == 1024
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="Normal or Warning"):
        build_event(obj, "R", "m", type="Error")  # type: ignore[arg-type]


def test_token_bucket_bursts_then_paces() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.try_acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.try_acquire() == pytest.approx(0.1)
    now[0] += 0.1
    assert bucket.try_acquire() == 0.0
    now[0] += 100
    assert [bucket.try_acquire() for _ in range(3)] == [0.0, 0.0, 0.0]


def test_token_bucket_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(qps=0, burst=1)
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(qps=1, burst=0)
