"""End to end: real nats-server, Kubernetes emulator and Actions simulator, real registrars."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arcflow.common.events import RegistrationFailed, ScaleSetAssigned, ScaleSetDeleted, SpecInvalid
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.polling import eventually

from .harness import Stack, state_of

pytestmark = pytest.mark.integration

VARIANTS: list[dict[str, Any]] = [
    {"name": "small"},
    {"name": "big", "runnerScaleSetLabels": ["big", "x64", "big"]},
    {"name": "gpu", "runnerScaleSetLabels": ["gpu"]},
]


def ers_manifest(stack: Stack, ars: str, variant: str) -> dict[str, Any]:
    labels = {
        "actions.github.com/scale-set-name": ars,
        "actions.github.com/scale-set-namespace": stack.namespace,
    }
    if variant:
        labels["actions.github.com/runner-variant"] = variant
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": f"{ars}-{variant}" if variant else ars,
            "namespace": stack.namespace,
            "labels": labels,
        },
        # What the CRD requires of a runner spec (a real server refuses the set without it).
        "spec": {
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": "https://github.com/acme",
                "githubConfigSecret": "github-creds",
                "runnerScaleSetId": 1,
            },
        },
    }


async def apply_ars(stack: Stack, manifest: dict[str, Any]) -> dict[str, Any]:
    created = await stack.kube.create(manifest)
    await stack.publish_change(created, "ADDED")
    return created


async def patch_ars(stack: Stack, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    patched = await stack.kube.patch_merge(
        AUTOSCALING_RUNNER_SET, name, {"spec": spec}, namespace=stack.namespace
    )
    await stack.publish_change(patched)
    return patched


class Found(dict[str, Any]):
    """A result that counts as "condition met" even when empty."""

    def __bool__(self) -> bool:
        return True


async def registered(stack: Stack, names: set[str]) -> dict[str, dict[str, Any]]:
    current = stack.scale_sets()
    assert set(current) == names, sorted(current)
    return Found(current)


async def test_variants_register_then_add_one(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("arc", VARIANTS, runnerScaleSetName="linux"))

    names = {"linux-small", "linux-big", "linux-gpu"}
    sets = await eventually(lambda: registered(stack, names))
    labels = {n: [lb["name"] for lb in s["labels"]] for n, s in sets.items()}
    assert labels == {
        "linux-small": ["linux-small"],
        "linux-big": ["linux-big", "big", "x64"],
        "linux-gpu": ["linux-gpu", "gpu"],
    }
    assert all(s["labels"][0]["type"] == "System" for s in sets.values())
    assert all(s["RunnerSetting"]["disableUpdate"] is True for s in sets.values())
    assert all(s["runnerGroupId"] == 1 for s in sets.values())

    records = await eventually(lambda: _announced(stack, "arc", 3))
    assert {v: r.scale_set_id for v, r in records.items()} == {
        "small": sets["linux-small"]["id"],
        "big": sets["linux-big"]["id"],
        "gpu": sets["linux-gpu"]["id"],
    }
    events = await stack.stream_events("ARC_SCALESETS")
    assigned = {e.variant: (s, e) for s, e in events if isinstance(e, ScaleSetAssigned)}
    assert set(assigned) == {"small", "big", "gpu"}
    subject, event = assigned["big"]
    assert subject == f"arc.scalesets.{stack.namespace}.arc.big"
    assert event.scale_set_name == "linux-big"
    assert event.labels == ["linux-big", "big", "x64"]
    assert event.runner_group_id == 1
    assert stack.create_requests() == 3

    await patch_ars(stack, "arc", {"runnerVariants": [*VARIANTS, {"name": "arm"}]})
    await eventually(lambda: registered(stack, names | {"linux-arm"}))
    await eventually(lambda: _announced(stack, "arc", 4))
    assert stack.create_requests() == 4, "adding a variant must create only that variant"
    assert {s["id"] for s in stack.scale_sets().values()} >= {s["id"] for s in sets.values()}


async def _announced(stack: Stack, ars: str, count: int) -> Any:
    records = await stack.records(ars)
    assert len(records) == count, sorted(records)
    assert all(r.announced for r in records.values())
    return records


async def test_removed_variant_is_deleted_only_after_its_runner_set(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("arc", VARIANTS))
    await eventually(lambda: registered(stack, {"arc-small", "arc-big", "arc-gpu"}))
    gpu_id = stack.scale_sets()["arc-gpu"]["id"]
    ers = await stack.kube.create(ers_manifest(stack, "arc", "gpu"))

    handled_before = state_of(app).handled
    await patch_ars(stack, "arc", {"runnerVariants": VARIANTS[:2]})
    # Seen handled, not waited for: the second pass that finished after the patch began after
    # the first had finished, so it read the patched ARS (from the change event or a sweep).
    await eventually(lambda: _handled_more(app, handled_before + 1))
    assert "arc-gpu" in stack.scale_sets(), "deleted under a live EphemeralRunnerSet"
    assert "gpu" in await stack.records("arc")

    await stack.kube.delete(
        EPHEMERAL_RUNNER_SET, ers["metadata"]["name"], namespace=stack.namespace
    )
    await stack.publish_change(ers, "DELETED")
    await eventually(lambda: registered(stack, {"arc-small", "arc-big"}))
    await eventually(lambda: _no_record(stack, "arc", "gpu"))
    events = await stack.stream_events("ARC_SCALESETS")
    deleted = [e for _, e in events if isinstance(e, ScaleSetDeleted)]
    assert [(e.variant, e.scale_set_id, e.reason) for e in deleted] == [
        ("gpu", gpu_id, "variant removed")
    ]


async def _handled_more(app: Any, before: int) -> bool:
    return bool(state_of(app).handled > before)


async def _no_record(stack: Stack, ars: str, variant: str) -> bool:
    return variant not in await stack.records(ars)


async def test_deleting_the_ars_deletes_all_scale_sets_after_runner_sets(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("arc", VARIANTS))
    await eventually(lambda: registered(stack, {"arc-small", "arc-big", "arc-gpu"}))
    runner_sets = [await stack.kube.create(ers_manifest(stack, "arc", v["name"])) for v in VARIANTS]

    handled_before = state_of(app).handled
    await stack.kube.delete(AUTOSCALING_RUNNER_SET, "arc", namespace=stack.namespace)
    deleting = await stack.get_ars("arc")
    assert deleting["metadata"]["deletionTimestamp"]
    await stack.publish_change(deleting)
    # Two passes finished after the deletion (the second began after it): it was handled.
    await eventually(lambda: _handled_more(app, handled_before + 1))
    assert len(stack.scale_sets()) == 3, "no scale set may go while its runner set lives"

    for ers in runner_sets:
        await stack.kube.delete(
            EPHEMERAL_RUNNER_SET, ers["metadata"]["name"], namespace=stack.namespace
        )
        await stack.publish_change(ers, "DELETED")
    await eventually(lambda: registered(stack, set()))
    await eventually(lambda: _records_empty(stack, "arc"))
    events = await stack.stream_events("ARC_SCALESETS")
    deleted = sorted(e.variant for _, e in events if isinstance(e, ScaleSetDeleted))
    assert deleted == ["big", "gpu", "small"]
    assert all(e.reason == "ARS deleted" for _, e in events if isinstance(e, ScaleSetDeleted))


async def _records_empty(stack: Stack, ars: str) -> bool:
    return not await stack.records(ars)


async def test_gone_ars_without_finalizer_still_deletes_its_scale_sets(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    manifest = stack.ars_manifest("solo")
    manifest["metadata"].pop("finalizers")
    created = await apply_ars(stack, manifest)
    await eventually(lambda: registered(stack, {"solo"}))
    await stack.kube.delete(AUTOSCALING_RUNNER_SET, "solo", namespace=stack.namespace)
    await stack.publish_change(created, "DELETED")
    await eventually(lambda: registered(stack, set()))


async def test_duplicate_event_storm_on_two_replicas_creates_no_duplicate(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    first = await stack.start_registrar("r1")
    second = await stack.start_registrar("r2")
    created = await stack.kube.create(stack.ars_manifest("storm", VARIANTS))
    from .harness import change_event

    event = change_event(created, "MODIFIED")
    await asyncio.gather(*(stack.publish_raw(event, dedup=False) for _ in range(50)))

    names = {"storm-small", "storm-big", "storm-gpu"}
    await eventually(lambda: registered(stack, names))
    await eventually(lambda: _consumer_drained(stack, "registrar-ars"), within=20)
    for app in (first, second):
        await state_of(app).queue.wait_idle(20)  # the events only enqueued the key
    assert stack.create_requests() == 3
    assert len(stack.scale_sets()) == 3
    records = await _announced(stack, "storm", 3)
    assert {r.scale_set_name for r in records.values()} == names
    events = [state_of(app).events for app in (first, second)]
    assert sum(events) >= 50
    # Events whose key was already waiting in the work queue ran no pass of their own.
    assert sum(state_of(app).queue.coalesced for app in (first, second)) > 0
    assert sum(state_of(app).handled for app in (first, second)) < 50
    errors = await stack.stream_events("ARC_ERRORS")
    assert errors == []
    dead = await stack.stream_events("ARC_DLQ")
    assert dead == []


async def _consumer_drained(stack: Stack, durable: str) -> bool:
    info = await stack.js.consumer_info("ARC_K8S", durable)
    assert info.num_pending == 0, info.num_pending
    assert info.num_ack_pending == 0, info.num_ack_pending
    return True


async def test_invalid_ars_registers_nothing_and_reports_why(
    kube_emulator: KubeEmulator, stack: Stack
) -> None:
    """On the emulator: a real server's CRD schema refuses this object before any controller
    sees it (tests/conformance/test_crd_validation.py shows that); the emulator stores it, as a
    server keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    bad = stack.ars_manifest("bad", [{"name": "Not_A_DNS_Label"}, {"name": "ok"}])
    bad["spec"]["githubConfigUrl"] = "https://github.com/"
    await apply_ars(stack, bad)
    errors = await eventually(lambda: _events_of(stack, "ARC_ERRORS", SpecInvalid))
    subject, event = errors[0]
    assert subject == f"arc.errors.{stack.namespace}.bad"
    paths = {issue.path for issue in event.errors}
    assert any(p.startswith("spec.runnerVariants[0]") for p in paths), paths
    assert "spec.githubConfigUrl" in paths
    assert stack.scale_sets() == {}
    assert stack.create_requests() == 0
    assert await stack.records("bad") == {}


async def test_template_less_ars_registers_nothing(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    bare = stack.ars_manifest("bare")
    del bare["spec"]["template"]
    await apply_ars(stack, bare)
    errors = await eventually(lambda: _events_of(stack, "ARC_ERRORS", SpecInvalid))
    assert {issue.path for issue in errors[0][1].errors} == {"spec.template"}
    assert stack.scale_sets() == {}
    assert stack.create_requests() == 0
    assert await stack.records("bare") == {}


async def _events_of(stack: Stack, stream: str, kind: type) -> list[tuple[str, Any]]:
    found = [(s, e) for s, e in await stack.stream_events(stream) if isinstance(e, kind)]
    assert found, f"no {kind.__name__} in {stream}"
    return found


async def test_missing_then_malformed_secret_reports_and_later_registers(stack: Stack) -> None:
    await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("creds"))
    failures = await eventually(lambda: _events_of(stack, "ARC_ERRORS", RegistrationFailed))
    assert "not found" in failures[0][1].reason
    assert failures[0][1].retryable

    await stack.create_secret({"github_app_id": "12"})
    await eventually(lambda: _failure_mentions(stack, "incomplete"))
    assert stack.scale_sets() == {}

    await stack.kube.delete("Secret", "github-creds", namespace=stack.namespace)
    await stack.create_secret({"github_token": stack.pat})
    # No new ARS event: the periodic sweep retries.
    await eventually(lambda: registered(stack, {"creds"}))


async def _failure_mentions(stack: Stack, text: str) -> bool:
    failures = await _events_of(stack, "ARC_ERRORS", RegistrationFailed)
    return any(text in e.reason for _, e in failures)


async def test_actions_outage_is_retried_by_the_work_queue(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar(run_sweep=False)
    # Five 503s exhaust one delivery's HTTP retries (fast policy: 5 attempts).
    stack.sim.inject_status("*/_apis/runtime/runnerscalesets", 503, times=5, method="POST")
    await apply_ars(stack, stack.ars_manifest("flaky"))
    await eventually(lambda: registered(stack, {"flaky"}))
    failures = await _events_of(stack, "ARC_ERRORS", RegistrationFailed)
    assert failures[0][1].retryable
    await eventually(lambda: _consumer_drained(stack, "registrar-ars"))
    await state_of(app).queue.wait_idle(20)
    assert stack.create_requests() == 6, "5 failed attempts, then one after the retry"
    assert state_of(app).events == 1, "retried by the queue, not by a redelivery"
    assert state_of(app).handled == 1, "one failed pass, one that finished"
    assert await stack.stream_events("ARC_DLQ") == []


async def test_rate_limit_with_retry_after_is_retried(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar(run_sweep=False)
    stack.sim.inject_status(
        "*/_apis/runtime/runnerscalesets", 429, times=5, method="GET", retry_after=0
    )
    await apply_ars(stack, stack.ars_manifest("limited"))
    await eventually(lambda: registered(stack, {"limited"}))


async def test_label_and_group_changes_update_in_place(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    stack.sim.add_runner_group("gpus")
    await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("upd", runnerScaleSetLabels=["a"]))
    first = await eventually(lambda: registered(stack, {"upd"}))
    await patch_ars(stack, "upd", {"runnerScaleSetLabels": ["a", "b"], "runnerGroup": "gpus"})

    async def updated() -> bool:
        current = stack.scale_sets()["upd"]
        assert [lb["name"] for lb in current["labels"]] == ["upd", "a", "b"]
        assert current["runnerGroupName"] == "gpus"
        return True

    await eventually(updated)
    assert stack.scale_sets()["upd"]["id"] == first["upd"]["id"]
    assert stack.create_requests() == 1
