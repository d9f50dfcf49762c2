"""410 Gone: a watch from a resourceVersion the server no longer has.

On the real server the history is etcd's, cut by a compaction (here through etcd's HTTP
gateway, ``POST /v3/kv/compaction``). kube-apiserver's watch cache (on by default) keeps
serving versions etcd has compacted, so the 410 test runs on a private control plane with
``--watch-cache=false``; the emulator's ``compact()`` models that server. What the default
server does with a compacted version is pinned by a test of its own.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arcflow.common.kube import CONFIG_MAP, KubeClient, KubeSettings, ResourceVersionExpired
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.conformance.conftest import Backend
from tests.conformance.helpers import apiserver_only, collect, config_map, names
from tests.fixtures.kube import APISERVER, BACKEND_ENV, EMULATOR
from tests.fixtures.kube import backend as chosen_backend

pytestmark = pytest.mark.integration

LABELS = {"arcflow.test/expiry": "1"}


def compact_etcd(etcd_port: int, revision: int) -> None:
    """Compact etcd's history up to ``revision`` (older revisions are gone)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{etcd_port}/v3/kv/compaction",
        data=json.dumps({"revision": str(revision), "physical": True}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


@pytest.fixture(scope="module")
def uncached_plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own whose kube-apiserver has no watch cache."""
    if chosen_backend() == EMULATOR:
        pytest.skip(f"{BACKEND_ENV}={EMULATOR}: no real control plane")
    plane = ControlPlane(extra_args={"kube-apiserver": ["--watch-cache=false"]}).start()
    try:
        yield plane
    finally:
        plane.stop()


@dataclass
class Expiring:
    """A client plus the way to cut its server's history (``compact(revision)``)."""

    client: KubeClient
    compact: Callable[[int], None]


@pytest.fixture(params=[APISERVER, EMULATOR])
async def expiring(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Expiring]:
    if request.param == APISERVER:
        plane: ControlPlane = request.getfixturevalue("uncached_plane")
        settings = KubeSettings(kubeconfig=str(plane.kubeconfig), request_timeout=10)
        async with await KubeClient.from_settings(settings) as client:
            yield Expiring(client, lambda rv: compact_etcd(plane.etcd_port, rv))
        return
    async with KubeEmulator(history_limit=1000) as emulator:
        path = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        settings = KubeSettings(kubeconfig=str(path), request_timeout=10)
        async with await KubeClient.from_settings(settings) as client:
            yield Expiring(client, emulator.compact)


async def _history(client: KubeClient, namespace: str) -> tuple[str, int]:
    """A ConfigMap written three times: (the first version, the last version)."""
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    first = await client.create(config_map(namespace, "old", labels=LABELS))
    last = first
    for value in ("w", "x"):
        last = await client.patch_merge(
            CONFIG_MAP, "old", {"data": {"k": value}}, namespace=namespace
        )
    return first["metadata"]["resourceVersion"], int(last["metadata"]["resourceVersion"])


async def test_watch_from_a_compacted_version_is_410_then_relist_recovers(
    expiring: Expiring,
) -> None:
    client, namespace = expiring.client, "expiry"
    first_rv, last_rv = await _history(client, namespace)
    await asyncio.to_thread(expiring.compact, last_rv)
    with pytest.raises(ResourceVersionExpired) as caught:
        await collect(
            client.watch(
                CONFIG_MAP, namespace=namespace, label_selector=LABELS, resource_version=first_rv
            ),
            1,
        )
    assert caught.value.status == 410
    assert caught.value.reason == "Expired"
    # The recovery: list, then watch from the list's version.
    listed = await client.list(CONFIG_MAP, namespace=namespace, label_selector=LABELS)
    assert [(i["metadata"]["name"], i["data"]) for i in listed.items] == [("old", {"k": "x"})]
    stream = client.watch(
        CONFIG_MAP,
        namespace=namespace,
        label_selector=LABELS,
        resource_version=listed.resource_version,
    )
    task = asyncio.create_task(collect(stream, 1))
    await client.create(config_map(namespace, "after", labels=LABELS))
    assert names(await task) == [("ADDED", "after")]


@apiserver_only
async def test_the_watch_cache_serves_versions_etcd_compacted(backend: Backend) -> None:
    """The default server (watch cache on) keeps answering a watch from a version etcd has
    compacted away, from its own window: a client cannot count on a 410 after a compaction,
    only on one once the version leaves the cache too (the emulator's ``history_limit``)."""
    if backend.plane is None:
        pytest.skip("needs the session's own control plane (its etcd)")
    client, namespace = backend.client, backend.namespace
    first = await client.create(config_map(namespace, "cached", labels=LABELS))
    last = first
    for value in ("w", "x"):
        last = await client.patch_merge(
            CONFIG_MAP, "cached", {"data": {"k": value}}, namespace=namespace
        )
    await asyncio.to_thread(
        compact_etcd, backend.plane.etcd_port, int(last["metadata"]["resourceVersion"])
    )
    events = await collect(
        client.watch(
            CONFIG_MAP,
            namespace=namespace,
            label_selector=LABELS,
            resource_version=first["metadata"]["resourceVersion"],
        ),
        2,
    )
    assert names(events) == [("MODIFIED", "cached"), ("MODIFIED", "cached")]
    assert events[-1].object["data"] == {"k": "x"}
