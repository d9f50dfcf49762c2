"""Changes and events routed to the keys of the objects they concern (ADR 0069), by the
controller runtime from the reconciler's declared controllers (ADR 0095)."""

from __future__ import annotations

from typing import Any

from arcflow.common.events import (
    EventKeys,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SpecInvalid,
    SpecIssue,
)
from arcflow.common.reconcile.manager import Manager
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.keys import Key


class _Sets:
    """A manager whose cache lookup is a function (only a ResourceQuota change reads it)."""

    def __init__(self, sets_in: Any) -> None:
        self.manager: Manager[None] = Manager(DECLARED, lambda _m: None, home_namespace="ctl")
        self.manager.objects = lambda kind, namespace: sets_in(namespace)  # type: ignore[method-assign]


def keys_for_change(kind: str, obj: dict[str, Any], home: str, sets_in: Any) -> set[Key]:
    assert home == "ctl"
    return set(_Sets(sets_in).manager.keys_for(kind, obj))


def keys_for_event(event: Any) -> list[Key]:
    return _Sets(_no_sets).manager.keys_for_event(event)


SCALE_SET_LABELS = {
    "actions.github.com/scale-set-name": "big",
    "actions.github.com/scale-set-namespace": "arc",
}


def _obj(name: str, namespace: str = "arc", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}}


def _no_sets(_namespace: str) -> list[dict[str, Any]]:
    raise AssertionError("only a ResourceQuota change reads the sets")


def _owner(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "x", "kind": kind, "name": name, "uid": "o"}


def test_a_runner_pod_routes_to_its_runner() -> None:
    pod = _obj("big-runner-abc", ownerReferences=[_owner("EphemeralRunner", "big-runner-abc")])
    assert keys_for_change("Pod", pod, "ctl", _no_sets) == {Key("er", "arc", "big-runner-abc")}


def test_a_runner_set_routes_to_itself_and_its_ars() -> None:
    ers = _obj("big-gpu", labels=SCALE_SET_LABELS)
    assert keys_for_change("EphemeralRunnerSet", ers, "ctl", _no_sets) == {
        Key("ers", "arc", "big-gpu"),
        Key("ars", "arc", "big"),
    }


def test_a_runner_routes_to_itself_and_its_set() -> None:
    er = _obj("big-gpu-x", ownerReferences=[_owner("EphemeralRunnerSet", "big-gpu")])
    assert keys_for_change("EphemeralRunner", er, "ctl", _no_sets) == {
        Key("er", "arc", "big-gpu-x"),
        Key("ers", "arc", "big-gpu"),
    }


def test_the_listener_rbac_routes_to_its_listener_in_the_controller_namespace() -> None:
    role = _obj("big-listener", labels={"auto-scaling-listener-name": "big-listener"})
    for kind in ("Role", "RoleBinding", "ServiceAccount"):
        assert keys_for_change(kind, role, "ctl", _no_sets) == {Key("al", "ctl", "big-listener")}


def test_an_owner_of_another_kind_is_not_a_key() -> None:
    pod = _obj("p", ownerReferences=[_owner("ReplicaSet", "rs")])
    assert keys_for_change("Pod", pod, "ctl", _no_sets) == set()
    assert keys_for_change("ConfigMap", _obj("c"), "ctl", _no_sets) == set()


def test_a_quota_routes_to_the_sets_of_its_namespace_that_use_it() -> None:
    sets = [
        {"metadata": {"name": "a"}, "spec": {"capacity": {"fromResourceQuota": True}}},
        {"metadata": {"name": "b"}, "spec": {}},
    ]
    asked: list[str] = []

    def sets_in(namespace: str) -> list[dict[str, Any]]:
        asked.append(namespace)
        return sets

    assert keys_for_change("ResourceQuota", _obj("q", "ns"), "ctl", sets_in) == {
        Key("ars", "ns", "a")
    }
    assert asked == ["ns"]


def test_registrar_and_listener_events_route_to_their_ars() -> None:
    from arcflow.common.events import RegistrationFailed, SessionFailed, SessionOpened

    keys = EventKeys(namespace="arc", ars="big", variant="gpu", scale_set_id=7)
    assigned = ScaleSetAssigned(
        source="registrar",
        keys=keys,
        variant="gpu",
        scale_set_id=3,
        scale_set_name="big-gpu",
        runner_group_id=1,
        runner_group_name="Default",
    )
    deleted = ScaleSetDeleted(
        source="registrar", keys=keys, variant="gpu", scale_set_id=3, scale_set_name="big-gpu"
    )
    failed = SessionFailed(source="listener", keys=keys, variant="gpu", reason="conflict")
    opened = SessionOpened(source="listener", keys=keys, variant="gpu", scale_set_id=7)
    registration = RegistrationFailed(source="registrar", keys=keys, variant="gpu", reason="x")
    for event in (assigned, deleted, failed, opened, registration):
        assert keys_for_event(event) == [Key("ars", "arc", "big")], event.type


def test_an_event_without_an_ars_or_of_another_type_routes_nowhere() -> None:
    invalid = SpecInvalid(
        source="registrar",
        keys=EventKeys(namespace="arc", ars="big"),
        errors=[SpecIssue(path="spec", message="bad")],
    )
    assert keys_for_event(invalid) == []
    unkeyed = ScaleSetDeleted(
        source="registrar", keys=EventKeys(), variant="", scale_set_id=3, scale_set_name="x"
    )
    assert keys_for_event(unkeyed) == []


def test_the_newest_failure_is_kept_where_the_ars_pass_reads_it() -> None:
    from datetime import UTC, datetime, timedelta

    from arcflow.common.events import RegistrationFailed, SessionFailed, SessionOpened
    from arcflow.reconciler.routing import registrations_of, sessions_of

    manager = _Sets(_no_sets).manager
    keys = EventKeys(namespace="arc", ars="big", variant="gpu")
    now = datetime.now(UTC)
    newer = RegistrationFailed(source="r", keys=keys, variant="gpu", reason="new", occurred_at=now)
    older = RegistrationFailed(
        source="r", keys=keys, variant="gpu", reason="old", occurred_at=now - timedelta(1)
    )
    for event in (newer, older):  # out of order: the newest stays
        assert manager.keys_for_event(event) == [Key("ars", "arc", "big")]
    assert manager.kept.group(registrations_of("arc", "big")) == {"": newer}
    failed = SessionFailed(source="l", keys=keys, variant="gpu", reason="x", occurred_at=now)
    opened = SessionOpened(
        source="l", keys=keys, variant="", scale_set_id=1, occurred_at=now - timedelta(1)
    )
    manager.keys_for_event(failed)
    manager.keys_for_event(opened)
    assert manager.kept.group(sessions_of("arc", "big")) == {"gpu": failed, "": opened}
    manager.kept.forget(registrations_of("arc", "big"), "", older)  # not the one held: stays
    assert manager.kept.group(registrations_of("arc", "big")) == {"": newer}
