"""ARS -> ERS per variant, one listener with its RBAC bundle, invalid specs, deletion."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.constants import (
    ANNOTATION_LISTENER_SCALE_SETS,
    ANNOTATION_SCALE_SET_IDS,
    FINALIZER_ARS,
    UNBOUNDED_MAX_RUNNERS,
)
from arcflow.common.listener_config import GitHubCredentials
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.manifests import assert_written
from tests.polling import eventually

from .harness import (
    TOKEN,
    Stack,
    ars_manifest,
    reconciler_test_settings,
    runner_template,
)

pytestmark = pytest.mark.integration

TWO_VARIANTS = [
    {"name": "cpu", "template": runner_template("runner:cpu"), "maxRunners": 10},
    {"name": "gpu", "template": runner_template("runner:gpu")},
]


def _names(objs: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objs}


async def _two_variant_set(stack: Stack) -> None:
    await stack.register("big", "cpu", 11)
    await stack.register("big", "gpu", 12)
    await stack.apply_ars(ars_manifest(stack.namespace, "big", runnerVariants=TWO_VARIANTS))

    async def converged() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "big", stack.namespace)
        pods = await stack.list("Pod", stack.controller_namespace)
        return (ars.get("status") or {}).get("phase") == "Running" and len(pods) == 1

    await eventually(converged)


async def test_two_variants_get_two_runner_sets_and_one_listener(stack: Stack) -> None:
    await _two_variant_set(stack)

    runner_sets = {e["metadata"]["name"]: e for e in await stack.list("EphemeralRunnerSet")}
    assert set(runner_sets) == {"big-cpu", "big-gpu"}
    ids = {n: e["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] for n, e in runner_sets.items()}
    assert ids == {"big-cpu": 11, "big-gpu": 12}
    images = {
        n: e["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"]
        for n, e in runner_sets.items()
    }
    assert images == {"big-cpu": "runner:cpu", "big-gpu": "runner:gpu"}

    ars = await stack.kube.get("AutoscalingRunnerSet", "big", stack.namespace)
    assert FINALIZER_ARS in ars["metadata"]["finalizers"]
    assert json.loads(ars["metadata"]["annotations"][ANNOTATION_SCALE_SET_IDS]) == {
        "cpu": 11,
        "gpu": 12,
    }

    listeners = await stack.list("AutoscalingListener", stack.controller_namespace)
    assert len(listeners) == 1
    tuples = json.loads(listeners[0]["metadata"]["annotations"][ANNOTATION_LISTENER_SCALE_SETS])
    assert [(t["ephemeralRunnerSetName"], t["runnerScaleSetId"]) for t in tuples] == [
        ("big-cpu", 11),
        ("big-gpu", 12),
    ]
    assert tuples[1]["maxRunners"] == UNBOUNDED_MAX_RUNNERS  # nil max -> MaxInt32, not 0

    role = (await stack.list("Role"))[0]
    assert role["rules"][0]["resourceNames"] == ["big-cpu", "big-gpu"]
    assert len(await stack.list("RoleBinding")) == 1
    config = (await stack.list("Secret", stack.controller_namespace))[0]
    config_json = json.loads(base64.b64decode(config["data"]["config.json"]))
    assert [s["runner_scale_set_id"] for s in config_json["scale_sets"]] == [11, 12]
    assert config_json["github_token"] == TOKEN

    audit = await stack.audit_events()
    created = {(e.kind, e.name) for e in audit if e.action == "created"}
    assert ("EphemeralRunnerSet", "big-cpu") in created
    assert ("EphemeralRunnerSet", "big-gpu") in created
    assert ("AutoscalingListener", listeners[0]["metadata"]["name"]) in created
    assert {e.variant for e in audit if e.kind == "EphemeralRunnerSet"} >= {"cpu", "gpu"}
    # no secret value in any audit event
    raw = json.dumps([e.model_dump(mode="json") for e in audit])
    assert TOKEN not in raw


async def test_adding_and_removing_a_variant(stack: Stack) -> None:
    await _two_variant_set(stack)
    first_listener = (await stack.list("AutoscalingListener", stack.controller_namespace))[0]

    await stack.register("big", "arm", 13)
    variants = [*TWO_VARIANTS, {"name": "arm", "template": runner_template("runner:arm")}]
    await stack.apply_ars(ars_manifest(stack.namespace, "big", runnerVariants=variants))

    async def three() -> bool:
        roles = await stack.list("Role")
        return bool(roles) and roles[0]["rules"][0]["resourceNames"] == [
            "big-cpu",
            "big-gpu",
            "big-arm",
        ]

    await eventually(three)
    assert _names(await stack.list("EphemeralRunnerSet")) == {"big-cpu", "big-gpu", "big-arm"}

    await stack.apply_ars(
        ars_manifest(stack.namespace, "big", runnerVariants=[TWO_VARIANTS[0], variants[2]])
    )

    async def gpu_gone() -> bool:
        names = _names(await stack.list("EphemeralRunnerSet"))
        listeners = await stack.list("AutoscalingListener", stack.controller_namespace)
        if names != {"big-cpu", "big-arm"} or len(listeners) != 1:
            return False
        raw = listeners[0]["metadata"]["annotations"][ANNOTATION_LISTENER_SCALE_SETS]
        roles = await stack.list("Role")
        return (
            [t["variantName"] for t in json.loads(raw)] == ["cpu", "arm"]
            and bool(roles)
            and roles[0]["rules"][0]["resourceNames"] == ["big-cpu", "big-arm"]
        )

    await eventually(gpu_gone)
    listener = (await stack.list("AutoscalingListener", stack.controller_namespace))[0]
    assert listener["metadata"]["name"] == first_listener["metadata"]["name"]
    assert listener["metadata"]["uid"] != first_listener["metadata"]["uid"]  # recreated


async def test_invalid_ars_gets_condition_and_event_and_no_children(
    kube_emulator: KubeEmulator, stack: Stack
) -> None:
    """On the emulator: a real server's CRD schema refuses this object before any controller
    sees it (tests/conformance/test_crd_validation.py shows that); the emulator stores it, as a
    server keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    await stack.register("bad", "", 21)
    bad = ars_manifest(
        stack.namespace,
        "bad",
        runnerVariants=[
            {"name": "Not_A_DNS_Label"},
            {"name": "x", "minRunners": 5, "maxRunners": 1},
        ],
    )
    await stack.apply_ars(bad)

    async def condition() -> dict[str, Any] | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "bad", stack.namespace)
        conditions = (ars.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "SpecValid"), None)

    found = await eventually(condition)
    assert found["status"] == "False"
    assert "runnerVariants[0].name" in found["message"]
    events = [
        e
        for e in await stack.list("Event")
        if e["involvedObject"]["name"] == "bad" and e["reason"] == "InvalidSpec"
    ]
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    await stack.app.queue.wait_idle()
    assert await stack.list("EphemeralRunnerSet") == []
    assert await stack.list("AutoscalingListener", stack.controller_namespace) == []
    ars = await stack.kube.get("AutoscalingRunnerSet", "bad", stack.namespace)
    assert FINALIZER_ARS not in (ars["metadata"].get("finalizers") or [])

    # a second pass over the same invalid spec (the resync's) emits no second Event
    await stack.app.resync()
    await stack.app.queue.wait_idle()
    again = [e for e in await stack.list("Event") if e["reason"] == "InvalidSpec"]
    assert len(again) == 1


_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    obj.pop("status", None)
    for key in _SERVER_FIELDS:
        obj["metadata"].pop(key, None)
    for ref in obj["metadata"].get("ownerReferences") or []:
        ref.pop("uid", None)
    return obj


async def test_single_variant_objects_equal_the_builders_plan(stack: Stack) -> None:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", minRunners=1, maxRunners=3))

    async def converged() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "solo", stack.namespace)
        return (ars.get("status") or {}).get("phase") == "Running"

    await eventually(converged)
    await stack.app.queue.wait_idle()
    ars = AutoscalingRunnerSet.from_manifest(
        await stack.kube.get("AutoscalingRunnerSet", "solo", stack.namespace)
    )
    settings: BuildSettings = reconciler_test_settings(
        controller_namespace=stack.controller_namespace
    ).build_settings()
    plan = plan_objects(
        ars, {"": 7}, settings, GitHubCredentials.model_validate({"github_token": TOKEN})
    )
    for want in plan:
        meta = want["metadata"]
        live = await stack.kube.get(want["kind"], meta["name"], meta["namespace"])
        assert_written(_comparable(live), _comparable(want), want["kind"])
    assert ANNOTATION_LISTENER_SCALE_SETS not in plan[1]["metadata"]["annotations"]
    listener = await stack.kube.get(
        "AutoscalingListener", plan[1]["metadata"]["name"], stack.controller_namespace
    )
    assert listener["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


async def test_deleting_the_ars_removes_every_child(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    """Listener and runner sets first; the set itself only once the registrar deleted its
    scale sets (here: the KV records the stand-in registrar wrote are deleted)."""
    await _two_variant_set(stack)
    await stack.kube.delete("AutoscalingRunnerSet", "big", namespace=stack.namespace)

    async def children_gone() -> bool:
        leftovers = await stack.list("EphemeralRunnerSet")
        assert not leftovers, [o["metadata"]["name"] for o in leftovers]
        return True

    await eventually(children_gone)

    # The registrar has not deleted the scale sets yet (their KV records are there): the set
    # keeps its finalizer (and the credentials Secret its cleanup finalizer), since deleting a
    # scale set needs those credentials.
    async def waiting_for_the_registrar() -> bool:
        assert "waiting for the registrar to delete the scale sets of cpu, gpu" in caplog.text
        return True

    await eventually(waiting_for_the_registrar, what="the reconciler waiting for the registrar")
    ars = await stack.kube.get("AutoscalingRunnerSet", "big", stack.namespace)
    assert ars["metadata"].get("finalizers"), ars["metadata"]
    await stack.unregister("big", "cpu")
    await stack.unregister("big", "gpu")

    async def all_gone() -> bool:
        leftovers = [
            *await stack.list("EphemeralRunnerSet"),
            *await stack.list("AutoscalingListener", stack.controller_namespace),
            *await stack.list("Pod", stack.controller_namespace),
            *await stack.list("Secret", stack.controller_namespace),
            # kube-controller-manager gives every namespace its ``default`` account.
            *[
                account
                for account in await stack.list("ServiceAccount", stack.controller_namespace)
                if account["metadata"]["name"] != "default"
            ],
            *await stack.list("Role"),
            *await stack.list("RoleBinding"),
            *await stack.list("AutoscalingRunnerSet"),
        ]
        assert not leftovers, sorted(f"{o['kind']}/{o['metadata']['name']}" for o in leftovers)
        return True

    await eventually(all_gone)
    deleted = {(e.kind, e.name) for e in await stack.audit_events() if e.action == "deleted"}
    assert ("EphemeralRunnerSet", "big-cpu") in deleted
    assert ("EphemeralRunnerSet", "big-gpu") in deleted


async def test_listener_objects_made_outside_the_cache_are_adopted(stack: Stack) -> None:
    """The listener's ServiceAccount and config Secret exist already, without our label (so
    the reconciler's cache does not hold them): creating them answers 409, they are read,
    given our labels and the right config, and the listener pod still comes up."""
    manifest = ars_manifest(stack.namespace, "pre", minRunners=0, maxRunners=3)
    settings: BuildSettings = reconciler_test_settings(
        controller_namespace=stack.controller_namespace
    ).build_settings()
    plan = plan_objects(
        AutoscalingRunnerSet.from_manifest(manifest),
        {"": 9},
        settings,
        GitHubCredentials.model_validate({"github_token": TOKEN}),
    )
    want = {o["kind"]: o for o in plan if o["kind"] in ("ServiceAccount", "Secret")}
    for kind, obj in want.items():
        bare: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": obj["metadata"]["name"], "namespace": stack.controller_namespace},
        }
        if kind == "Secret":
            bare["data"] = {"config.json": base64.b64encode(b"{}").decode()}
        await stack.kube.create(bare)
    await stack.register("pre", "", 9)
    await stack.apply_ars(manifest)

    async def adopted() -> bool:
        pods = await stack.list("Pod", stack.controller_namespace)
        live = {
            kind: await stack.kube.get(kind, obj["metadata"]["name"], stack.controller_namespace)
            for kind, obj in want.items()
        }
        return (
            len(pods) == 1
            and all(
                (obj["metadata"].get("labels") or {}).items()
                <= (live[k]["metadata"].get("labels") or {}).items()
                for k, obj in want.items()
            )
            and live["Secret"].get("data") == want["Secret"]["data"]
        )

    await eventually(adopted)
