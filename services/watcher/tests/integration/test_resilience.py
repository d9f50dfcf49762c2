"""Faults lose no change: dropped watches, 410 Gone, API-server, NATS and watcher restarts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from arcflow.common.kube import EPHEMERAL_RUNNER, POD
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.kube_emulator.store import DeleteOptions
from arcflow.devstack.nats_server import NatsServer

pytestmark = pytest.mark.integration


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
    emu = harness.emulator
    for _ in range(3):
        await _until(lambda: emu.open_watches == 6)
        assert emu.drop_watches(abrupt=abrupt) == 6
    expected = await _changes_via_api(harness, "d")
    got = await harness.wait_keys(seeded + expected)
    _no_duplicates(got)
    text = await harness.scrape()
    assert harness.metric_value(text, "arcflow_watcher_watch_restarts_total") >= 1
    # Resumed, not re-listed: only the initial lists happened.
    assert harness.metric_value(text, "arcflow_watcher_relists_total", reason="expired") == 0


def _gap_changes(emu: KubeEmulator, ns: str, prefix: str) -> list[tuple[str, str, str]]:
    """Changes written straight into the emulator's store while no watch is open."""
    store = emu.store
    store.create(EPHEMERAL_RUNNER, ns, {"metadata": {"name": f"{prefix}-new"}, "spec": {}})
    store.patch(
        EPHEMERAL_RUNNER,
        ns,
        f"{prefix}-old",
        "application/merge-patch+json",
        {"metadata": {"labels": {"gap": "yes"}}},
    )
    store.delete(POD, ns, f"{prefix}-pod", DeleteOptions())
    return [
        ("ephemeralrunners", f"{prefix}-new", "ADDED"),
        ("ephemeralrunners", f"{prefix}-old", "MODIFIED"),
        ("pods", f"{prefix}-pod", "DELETED"),
    ]


async def test_expired_resource_version_relists_and_publishes_the_gap(harness: Any) -> None:
    await harness.start()
    seeded = await _seed(harness, "e")
    await harness.wait_keys(seeded)
    emu = harness.emulator
    await emu.stop()  # the watcher loses its watches and retries against a dead server
    expected = _gap_changes(emu, harness.namespace, "e")
    emu.expire_history()  # its last resourceVersion is now too old: 410 on resume
    await emu.start()
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


async def test_expire_history_then_changes_while_watching(harness: Any) -> None:
    await harness.start()
    seeded = await _seed(harness, "x")
    await harness.wait_keys(seeded)
    harness.emulator.expire_history()
    expected = await _changes_via_api(harness, "x")
    harness.emulator.drop_watches()  # resume from a now-expired resourceVersion
    more = [("pods", "x-late", "ADDED")]
    await harness.kube.create(harness.manifest("Pod", "x-late", harness.namespace))
    got = await harness.wait_keys(seeded + expected + more)
    _no_duplicates(got)


async def test_api_server_restart_loses_nothing(harness: Any) -> None:
    await harness.start()
    seeded = await _seed(harness, "r")
    await harness.wait_keys(seeded)
    emu = harness.emulator
    await emu.stop()
    expected = _gap_changes(emu, harness.namespace, "r")
    await asyncio.sleep(0.3)  # the watcher is backing off against a closed port
    await emu.start()
    await harness.kube.create(harness.manifest("Pod", "r-after", harness.namespace))
    expected.append(("pods", "r-after", "ADDED"))
    got = await harness.wait_keys(seeded + expected)
    _no_duplicates(got)
    # restart() itself (stop+start in one go) is survived as well.
    await emu.restart()
    await harness.kube.create(harness.manifest("Pod", "r-after-restart", harness.namespace))
    await harness.wait_keys([("pods", "r-after-restart", "ADDED")])


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
