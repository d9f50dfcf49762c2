"""Faults lose no change: dropped watches, 410 Gone, API-server, NATS and watcher restarts.

On the real kube-apiserver: watches are cut and held by the fault proxy in front of it; the
410 tests run on a private control plane without watch cache whose etcd history is compacted
(as tests/conformance/test_watch_expiry.py does); the restart test restarts the kube-apiserver
of a private control plane.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.kube import EPHEMERAL_RUNNER, POD
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import Delay
from arcflow.devstack.nats_server import NatsServer
from tests.fixtures.kube import APISERVER, backend
from tests.polling import eventually

from .conftest import WatcherHarness, harness_on

pytestmark = pytest.mark.integration


def _private_plane(**kwargs: Any) -> Iterator[ControlPlane]:
    if backend() != APISERVER:
        pytest.skip("needs a real control plane of the test's own")
    plane = ControlPlane(**kwargs).start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def restartable_plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own, whose kube-apiserver a test restarts."""
    yield from _private_plane()


@pytest.fixture(scope="module")
def uncached_plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own without watch cache: a compacted etcd revision
    is then 410 Gone for a watch (the watch cache would go on serving it)."""
    yield from _private_plane(extra_args={"kube-apiserver": ["--watch-cache=false"]})


@pytest.fixture
async def restart_harness(
    restartable_plane: ControlPlane, nats_url: str, tmp_path: Path
) -> AsyncIterator[WatcherHarness]:
    async with harness_on(restartable_plane, nats_url, tmp_path) as h:
        yield h


@pytest.fixture
async def expiry_harness(
    uncached_plane: ControlPlane, nats_url: str, tmp_path: Path
) -> AsyncIterator[WatcherHarness]:
    async with harness_on(uncached_plane, nats_url, tmp_path) as h:
        yield h


def _compact_etcd(plane: ControlPlane, revision: int) -> None:
    """Compact etcd's history up to ``revision`` through its HTTP gateway."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{plane.etcd_port}/v3/kv/compaction",
        data=json.dumps({"revision": str(revision), "physical": True}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


async def _expire_history(h: WatcherHarness, plane: ControlPlane) -> int:
    """Every resourceVersion the watcher holds becomes too old: a write it does not watch
    (a ConfigMap) moves etcd's revision past them, and etcd is compacted up to it. Returns
    the compacted revision."""
    marker = await h.kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "compaction-marker"}},
        namespace=h.namespace,
    )
    revision = int(marker["metadata"]["resourceVersion"])
    await asyncio.to_thread(_compact_etcd, plane, revision)
    return revision


async def _hold_watches(h: WatcherHarness) -> Delay:
    """New watches are held at the proxy (no error: the watcher waits, it does not re-list),
    the open ones are cut; returns the hold once every kind is waiting on it."""
    hold = h.faults.delay(None, verb="watch")
    cut = h.faults.drop_watches(abrupt=True)
    assert cut == 6
    await _until(lambda: hold.hits >= cut)
    return hold


async def _changes_via_api(h: Any, prefix: str) -> list[tuple[str, str, str]]:
    """Create, modify and delete through the API; the keys that must show up."""
    ns = h.namespace
    await h.kube.create(h.manifest("EphemeralRunner", f"{prefix}-new", ns))
    await h.kube.patch_merge(
        EPHEMERAL_RUNNER, f"{prefix}-old", {"metadata": {"labels": {"step": prefix}}}, namespace=ns
    )
    await h.kube.delete(POD, f"{prefix}-pod", namespace=ns)
    return [
        ("ephemeralrunners", f"{prefix}-new", "ADDED"),
        ("ephemeralrunners", f"{prefix}-old", "MODIFIED"),
        ("pods", f"{prefix}-pod", "DELETED"),
    ]


async def _seed(h: Any, prefix: str) -> list[tuple[str, str, str]]:
    await h.kube.create(h.manifest("EphemeralRunner", f"{prefix}-old", h.namespace))
    await h.kube.create(h.manifest("Pod", f"{prefix}-pod", h.namespace))
    return [("ephemeralrunners", f"{prefix}-old", "ADDED"), ("pods", f"{prefix}-pod", "ADDED")]


async def _until(condition: Callable[[], bool], within: float = 5.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    pytest.fail("condition not met in time")


def _no_duplicates(got: list[Any]) -> None:
    keys = [(s.event.uid, s.event.resource_version, s.event.change) for s in got]
    assert len(keys) == len(set(keys)), "a change was stored twice"


@pytest.mark.parametrize("abrupt", [False, True])
async def test_dropped_watch_resumes_without_loss(harness: Any, abrupt: bool) -> None:
    await harness.start()
    seeded = await _seed(harness, "d")
    await harness.wait_keys(seeded)
    proxy = harness.faults
    for _ in range(3):
        await _until(lambda: proxy.open_watches == 6)
        assert proxy.drop_watches(abrupt=abrupt) == 6
    expected = await _changes_via_api(harness, "d")
    got = await harness.wait_keys(seeded + expected)
    _no_duplicates(got)
    text = await harness.scrape()
    assert harness.metric_value(text, "arcflow_watcher_watch_restarts_total") >= 1
    # Resumed, not re-listed: only the initial lists happened.
    assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="expired") == 0


async def test_expired_resource_version_relists_and_publishes_the_gap(
    expiry_harness: WatcherHarness, uncached_plane: ControlPlane
) -> None:
    harness = expiry_harness
    await harness.start()
    seeded = await _seed(harness, "e")
    await harness.wait_keys(seeded)
    hold = await _hold_watches(harness)  # the watcher lost its watches and waits to resume
    expected = await _changes_via_api(harness, "e")
    await _expire_history(harness, uncached_plane)  # its last resourceVersion: 410 on resume
    hold.remove()
    got = await harness.wait_keys(seeded + expected)
    _no_duplicates(got)
    deleted = [s for s in got if s.key == ("pods", "e-pod", "DELETED")]
    assert len(deleted) == 1
    text = await harness.scrape()
    assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="expired") >= 1
    # Changes after the re-list flow through the new watch.
    more = await _changes_via_api_after_relist(harness)
    await harness.wait_keys(more)


async def _changes_via_api_after_relist(h: Any) -> list[tuple[str, str, str]]:
    await h.kube.create(h.manifest("Pod", "after-410", h.namespace))
    return [("pods", "after-410", "ADDED")]


async def test_expire_history_then_changes_while_watching(
    expiry_harness: WatcherHarness, uncached_plane: ControlPlane
) -> None:
    harness = expiry_harness
    await harness.start()
    seeded = await _seed(harness, "x")
    await harness.wait_keys(seeded)
    expected = await _changes_via_api(harness, "x")  # seen live, or by the re-list below
    hold = await _hold_watches(harness)
    resume_points = _resume_points(harness)
    compacted = await _expire_history(harness, uncached_plane)
    recorded = len(harness.faults.requests)
    hold.remove()  # resume from a now-expired resourceVersion
    more = [("pods", "x-late", "ADDED")]
    await harness.kube.create(harness.manifest("Pod", "x-late", harness.namespace))
    await harness.wait_keys(seeded + expected + more)

    # A watcher whose resume point is the revision just before the compacted one (the pods'
    # here, often) resumes without a 410; the others get theirs in the watch stream, each at
    # its own pace, and re-list: wait for the re-list, do not sample right after x-late.
    async def relisted() -> bool:
        text = await harness.scrape()
        watches = [
            f"{r.path}?{r.query} -> {r.status}"
            for r in list(harness.faults.requests)[recorded:]
            if "watch=" in r.query
        ]
        assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="expired"), (
            f"compacted at {compacted}; resume points {resume_points}; watches after the "
            f"release: {watches}; metrics: "
            + " ".join(line for line in text.splitlines() if line.startswith("arcflow_watcher_re"))
        )
        return True

    await eventually(relisted, within=30, what="a re-list after the 410 of an expired watch")
    _no_duplicates(await harness.wait_keys(seeded + expected + more))


def _resume_points(h: WatcherHarness) -> dict[str, str | None]:
    """The resourceVersion each kind's watcher would resume from."""
    assert h.service is not None
    return {w.scope.label: w.cache.resource_version for w in h.service.watchers}


async def test_api_server_restart_loses_nothing(
    restart_harness: WatcherHarness, restartable_plane: ControlPlane
) -> None:
    harness = restart_harness
    await harness.start()
    seeded = await _seed(harness, "r")
    await harness.wait_keys(seeded)
    # kube-apiserver restarts under the open watches: they break, requests are refused.
    restarting = asyncio.ensure_future(asyncio.to_thread(restartable_plane.restart_apiserver))
    proxy = harness.faults
    await _until(lambda: proxy.open_watches == 0, within=30)
    # From now on the watches are held at the proxy, so what changes right after the restart,
    # before the watcher is back, is a gap it must catch up on.
    hold = proxy.delay(None, verb="watch")
    await restarting
    expected = await _changes_via_api(harness, "r")
    hold.remove()
    await harness.kube.create(harness.manifest("Pod", "r-after", harness.namespace))
    expected.append(("pods", "r-after", "ADDED"))
    got = await harness.wait_keys(seeded + expected, within=15)
    _no_duplicates(got)
    # Watches flow again: a change now is announced live.
    await harness.kube.create(harness.manifest("Pod", "r-live", harness.namespace))
    await harness.wait_keys([("pods", "r-live", "ADDED")])
    await _until(lambda: proxy.open_watches == 6)


async def test_nats_restart_loses_no_change(
    private_nats_server: NatsServer, namespace: str, harness_factory: Any
) -> None:
    h = await harness_factory(private_nats_server.url)
    h.overrides["publish_timeout_seconds"] = 0.4  # shorter than the outage: publishes fail
    await h.start()
    seeded = await _seed(h, "n")
    await h.wait_keys(seeded)
    private_nats_server.stop(remove_store=False)
    expected = await _changes_via_api(h, "n")
    await h.kube.create(h.manifest("Secret", "n-secret", namespace))
    expected.append(("secrets", "n-secret", "ADDED"))
    await asyncio.sleep(1.2)  # publishes time out and are retried meanwhile
    private_nats_server.start()
    got = await h.wait_keys(seeded + expected, within=8)
    _no_duplicates(got)
    text = await h.scrape()
    assert h.metric_value(text, "arcflow_watcher_publish_errors_total") >= 1
    # restart() in one go, with a change right after.
    private_nats_server.restart()
    await h.kube.create(h.manifest("Pod", "n-after", namespace))
    await h.wait_keys([("pods", "n-after", "ADDED")], within=8)


async def test_restarted_watcher_announces_only_what_changed(harness: Any) -> None:
    seeded = await _seed(harness, "s")
    await harness.start()
    await harness.wait_keys(seeded)
    first = await harness.events()
    await harness.stop_service()  # saves the resume points in the KV bucket
    expected = await _changes_via_api(harness, "s")
    await harness.start()
    got = await harness.wait_keys(seeded + expected)
    assert len(got) == len(first) + len(expected), [s.key for s in got]
    _no_duplicates(got)
    # Nothing was even re-sent: the second run published exactly the three changes.
    text = await harness.scrape()
    published = harness.metric_value(text, "arcflow_watcher_events_published_total")
    assert published == len(first) + len(expected)
