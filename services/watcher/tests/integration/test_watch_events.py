"""The watcher against a real kube-apiserver and nats-server: exact events per change."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import pytest

from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    SECRET,
    Resource,
)
from arcflow.common.nats.publish import MSG_ID_HEADER
from arcflow.watcher.watchers import WatcherService

pytestmark = pytest.mark.integration

KINDS: list[Resource] = [
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    EPHEMERAL_RUNNER,
    AUTOSCALING_LISTENER,
    POD,
    SECRET,
]


async def test_readiness_flips_after_the_initial_lists(harness: Any) -> None:
    await harness.kube.create(harness.manifest("Pod", "before-start", harness.namespace))
    service = await harness.start(wait_ready=False)
    status, body = await harness.health("/readyz")
    # The initial lists may already be done on a fast machine; if not, readyz says what waits.
    if status == 503:
        assert body["pending"]
    async with asyncio.timeout(5):
        await service.wait_ready()
    status, body = await harness.health("/readyz")
    assert (status, body["status"], body["pending"]) == (200, "ready", [])
    assert (await harness.health("/healthz"))[0] == 200
    await harness.wait_keys([("pods", "before-start", "ADDED")])


async def test_not_ready_before_watchers_start(harness: Any) -> None:
    await harness.start()  # connects NATS and metrics, then we build a second, unstarted one
    idle = WatcherService(
        harness.settings(), kube=harness.kube, js=harness.js, meter=harness.metrics.meter
    )
    assert (idle.ready, idle.healthy) == (False, False)
    pending = idle.details()["pending"]
    assert len(pending) == 6
    assert f"pods@{harness.namespace}" in pending


async def test_create_modify_delete_each_kind_yields_exact_events(
    harness: Any, on_real_server: bool
) -> None:
    ns = harness.namespace
    await harness.start()
    expected: dict[str, list[tuple[str, str]]] = {}
    for resource in KINDS:
        name = f"{resource.singular}-1"
        created = await harness.kube.create(harness.manifest(resource.kind, name, ns))
        patch: dict[str, Any] = {"metadata": {"labels": {"touched": "yes"}}}
        if resource is SECRET:
            patch["data"] = {"token": "c2VjcmV0"}
        modified = await harness.kube.patch_merge(resource, name, patch, namespace=ns)
        await harness.kube.delete(resource, name, namespace=ns)
        subject = f"arc.k8s.{resource.plural}.{ns}.{name}"
        expected[subject] = [
            ("ADDED", created["metadata"]["resourceVersion"]),
            ("MODIFIED", modified["metadata"]["resourceVersion"]),
            ("DELETED", ""),
        ]
    # A pod without our label is not watched.
    stranger = harness.manifest("Pod", "not-ours", ns)
    stranger["metadata"]["labels"] = {"app": "other"}
    await harness.kube.create(stranger)

    # A real server deletes a pod in two writes: deletionTimestamp set (MODIFIED), then gone.
    total = 3 * len(KINDS) + (1 if on_real_server else 0)
    got = await harness.wait_events(lambda got: len(got) >= total)
    await asyncio.sleep(0.3)  # nothing more may arrive
    got = await harness.events()
    assert len(got) == total, "; ".join(map(str, [s.key for s in got]))
    by_subject: dict[str, list[Any]] = {}
    deleting = []
    for seen in got:
        if seen.event.change == "MODIFIED" and seen.event.deletion_timestamp:
            deleting.append(seen.key)
            continue
        by_subject.setdefault(seen.subject, []).append(seen)
    assert deleting == ([("pods", "pod-1", "MODIFIED")] if on_real_server else [])
    assert set(by_subject) == set(expected)
    for subject, seq in by_subject.items():
        changes = [(s.event.change, s.event.resource_version) for s in seq]
        want = expected[subject]
        assert [c for c, _ in changes] == [c for c, _ in want], subject
        assert changes[0][1] == want[0][1]
        assert changes[1][1] == want[1][1]
        assert int(changes[2][1]) > int(want[1][1])
        for seen in seq:
            event = seen.event
            assert event.namespace == ns
            assert event.source == "watcher"
            assert seen.headers[MSG_ID_HEADER] == (
                f"k8s.object.changed:{event.uid}:{event.resource_version}:{event.change}"
            )
        assert seq[1].event.labels["touched"] == "yes"
        if seq[0].event.resource != "secrets":  # a Secret has no generation on a real server
            assert seq[0].event.generation == 1
    # Kinds and api versions as upstream names them.
    kinds = {s.event.kind for s in got}
    assert kinds == {r.kind for r in KINDS}

    text = await harness.scrape()
    assert (
        harness.metric_value(
            text, "arcflow_watcher_events_published_total", resource="pods", change="ADDED"
        )
        >= 1
    )
    assert harness.metric_value(text, "arcflow_watcher_publish_lag_seconds_count") >= 18
    assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="initial") == 6


async def test_secret_data_never_reaches_the_stream_or_kv(harness: Any) -> None:
    ns = harness.namespace
    await harness.start()
    plain = "ghs_S3cretJitTokenValue0123456789"
    encoded = "Z2hzX1MzY3JldEppdFRva2VuVmFsdWUwMTIzNDU2Nzg5"
    secret = harness.manifest("Secret", "jit-config", ns, data={"jitToken": encoded})
    secret["stringData"] = {"token": plain}
    await harness.kube.create(secret)
    await harness.kube.patch_merge(SECRET, "jit-config", {"data": {"more": encoded}}, namespace=ns)
    await harness.kube.delete(SECRET, "jit-config", namespace=ns)
    got = await harness.wait_keys(
        [(r, "jit-config", c) for r in ("secrets",) for c in ("ADDED", "MODIFIED", "DELETED")]
    )
    for seen in got:
        assert encoded.encode() not in seen.raw
        assert plain.encode() not in seen.raw
        assert b"jitToken" not in seen.raw
        assert "data" not in seen.event.model_dump()
    # The persisted resume point holds metadata only as well.
    await harness.stop_service()
    kv = await harness.js.key_value("arcflow_watch")
    entry = await kv.get(f"secrets.{ns}")
    stored = zlib.decompress(entry.value or b"")
    assert encoded.encode() not in stored
    assert plain.encode() not in stored


async def test_malformed_object_is_reported_and_others_keep_flowing(
    emulator_harness: Any,
) -> None:
    """On the emulator: no real server can be made to hand out an object without
    ``metadata.uid``."""
    harness = emulator_harness
    ns = harness.namespace
    await harness.start()
    await harness.kube.create(harness.manifest("Pod", "broken", ns))
    await harness.wait_keys([("pods", "broken", "ADDED")])
    # A broken server hands out an object without metadata.uid from now on.
    stored = harness.emulator.store.objects[("", "pods")][(ns, "broken")]
    del stored["metadata"]["uid"]
    await harness.kube.patch_merge(
        POD, "broken", {"metadata": {"labels": {"x": "1"}}}, namespace=ns
    )
    await harness.kube.create(harness.manifest("Pod", "healthy", ns))
    await harness.kube.create(harness.manifest("EphemeralRunner", "runner-after", ns))
    got = await harness.wait_keys(
        [("pods", "healthy", "ADDED"), ("ephemeralrunners", "runner-after", "ADDED")]
    )
    assert ("pods", "broken", "MODIFIED") not in {s.key for s in got}
    text = await harness.scrape()
    assert (
        harness.metric_value(text, "arcflow_watcher_malformed_objects_total", resource="pods") >= 1
    )
    # A re-list meets the malformed item again: reported, skipped, the rest still announced.
    harness.emulator.expire_history()
    harness.emulator.drop_watches()
    await harness.kube.create(harness.manifest("Pod", "after-relist", ns))
    got = await harness.wait_keys([("pods", "after-relist", "ADDED")])
    assert ("pods", "broken", "DELETED") not in {s.key for s in got}
    text = await harness.scrape()
    assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="expired") >= 1
    assert (await harness.health("/healthz"))[0] == 200


async def test_resync_rounds_publish_each_object_with_distinct_ids(harness: Any) -> None:
    ns = harness.namespace
    harness.overrides["resync_interval_seconds"] = 0.4
    await harness.kube.create(harness.manifest("EphemeralRunnerSet", "ers-a", ns))
    await harness.kube.create(harness.manifest("EphemeralRunnerSet", "ers-b", ns))
    await harness.start()
    got = await harness.wait_events(
        lambda got: sum(1 for s in got if s.event.change == "RESYNC") >= 4, within=5
    )
    resyncs = [s for s in got if s.event.change == "RESYNC"]
    names = [s.event.name for s in resyncs]
    assert names.count("ers-a") >= 2
    assert names.count("ers-b") >= 2
    ids = [s.headers[MSG_ID_HEADER] for s in resyncs]
    assert len(set(ids)) == len(ids)
    assert all(s.event.resource_version for s in resyncs)


async def test_a_burst_is_stored_in_order_and_the_resume_point_holds_only_stored_changes(
    harness: Any,
) -> None:
    """A burst of changes, sent through the publish window (ADR 0114), lands in the stream
    in the order the API server made them: per object, resourceVersions only go up, and
    every change is there once. The resume point saved on stop is at or past the last one."""
    ns = harness.namespace
    await harness.start()
    names = [f"burst-{i}" for i in range(40)]
    created = await asyncio.gather(
        *(harness.kube.create(harness.manifest("EphemeralRunner", n, ns)) for n in names)
    )
    versions: dict[str, list[int]] = {
        str(c["metadata"]["name"]): [int(c["metadata"]["resourceVersion"])] for c in created
    }
    for step in range(5):  # five rounds of a patch of every runner, all at once
        patched = await asyncio.gather(
            *(
                harness.kube.patch_merge(
                    EPHEMERAL_RUNNER, n, {"metadata": {"labels": {"step": str(step)}}}, namespace=ns
                )
                for n in names
            )
        )
        for p in patched:
            versions[str(p["metadata"]["name"])].append(int(p["metadata"]["resourceVersion"]))
    want = sum(len(v) for v in versions.values())
    got = await harness.wait_events(
        lambda seen: len([s for s in seen if s.event.name in versions]) >= want,
        within=30.0,
        subject_filter=f"arc.k8s.ephemeralrunners.{ns}.>",
    )
    stored: dict[str, list[int]] = {}
    for seen in got:
        stored.setdefault(seen.event.name, []).append(int(seen.event.resource_version or 0))
    for name, made in versions.items():
        assert stored[name] == sorted(made), (name, stored[name], made)
    await harness.stop_service()  # saves the resume point after the window settled
    kv = await (await harness._reader_js()).key_value("arcflow_watch")
    keys = [k for k in await kv.keys() if "ephemeralrunners" in k]
    assert keys, "no resume point saved for the runners' scope"
    points = [await kv.get(k) for k in keys]
    newest = max(max(v) for v in versions.values())
    assert any(newest <= _resume_version(p.value or b"") for p in points), (
        "the saved resume point is behind the last stored change"
    )


def _resume_version(raw: bytes) -> int:
    from arcflow.watcher.changes import ResumePoint

    point = ResumePoint.decode(raw)
    return int(point.to_cache().resource_version or 0)
