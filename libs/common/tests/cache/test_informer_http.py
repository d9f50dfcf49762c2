"""The watch-fed cache against the emulator over HTTP: snapshot, updates, read-your-writes,
dropped watches, 410 Gone and an emulator restart all converge."""

from __future__ import annotations

import pytest

from arcflow.common.cache import CachedKind, Change, ObjectCache
from arcflow.common.kube import CONFIG_MAP, NAMESPACE, KubeClient
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.polling import eventually

pytestmark = pytest.mark.integration


def config_map(ns: str, name: str, value: str = "1") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
        "data": {"v": value},
    }


async def test_snapshot_then_updates_and_own_writes_at_once(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(config_map(ns, "before"))
    seen: list[Change] = []
    cache = ObjectCache(kube_client, [CachedKind(CONFIG_MAP, {"app": "t"})], on_change=seen.append)
    cache.start()
    try:
        await cache.synced()
        assert cache.get(CONFIG_MAP, "before", ns) is not None
        # Another client's write shows up through the watch.
        await kube_client.create(config_map(ns, "other"))
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "other", ns)), what="watched create")
        # Our own write is visible before the watch echo, and the echo does not undo it.
        created = await kube_client.create(config_map(ns, "mine"))
        cache.observe_write(created)
        assert cache.get(CONFIG_MAP, "mine", ns) is not None
        patched = await kube_client.patch_merge(
            CONFIG_MAP, "mine", {"data": {"v": "2"}}, namespace=ns
        )
        cache.observe_write(patched)
        assert cache.get(CONFIG_MAP, "mine", ns)["data"]["v"] == "2"
        response = await kube_client.delete(CONFIG_MAP, "mine", namespace=ns)
        cache.observe_delete(created, response)
        assert cache.get(CONFIG_MAP, "mine", ns) is None
        await kube_client.create(config_map(ns, "late"))
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "late", ns)), what="late")
        assert cache.get(CONFIG_MAP, "mine", ns) is None  # the echoes came and went
        assert {c.obj["metadata"]["name"] for c in seen} >= {"before", "other", "mine", "late"}
        assert cache.live_reads == 0
    finally:
        await cache.stop()


async def test_drops_410_and_restart_converge(
    kube_client: KubeClient, kube_emulator: KubeEmulator, kube_namespace: str
) -> None:
    ns = kube_namespace
    cache = ObjectCache(kube_client, [CachedKind(CONFIG_MAP, {"app": "t"})])
    informer = cache.informers["ConfigMap"]
    informer.backoff_base = 0.02
    cache.start()
    try:
        await cache.synced()
        kube_emulator.drop_watches(abrupt=True)
        await kube_client.create(config_map(ns, "after-drop"))
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "after-drop", ns)), what="drop")

        # 410: the watch's version leaves the history while the watch is down.
        lists = informer.lists
        await kube_client.create(config_map(ns, "gone-soon"))
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "gone-soon", ns)), what="seen")
        kube_emulator.expire_history()
        kube_emulator.drop_watches()
        await kube_client.delete(CONFIG_MAP, "gone-soon", namespace=ns)
        kube_emulator.expire_history()
        await eventually(
            lambda: _async(cache.get(CONFIG_MAP, "gone-soon", ns) is None), what="410 delete"
        )
        await kube_emulator.restart()
        await kube_client.create(config_map(ns, "after-restart"))
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "after-restart", ns)), what="restart")
        assert informer.lists >= lists
    finally:
        await cache.stop()


async def test_a_delayed_cache_lags_but_catches_up(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    cache = ObjectCache(kube_client, [CachedKind(CONFIG_MAP, {"app": "t"})], delay_seconds=0.5)
    cache.start()
    try:
        await cache.synced()
        await kube_client.create(config_map(ns, "slow"))
        assert cache.get(CONFIG_MAP, "slow", ns) is None
        await eventually(lambda: _async(cache.get(CONFIG_MAP, "slow", ns)), what="delayed")
    finally:
        await cache.stop()


async def _async(value: object) -> object:
    return value


async def test_releasing_the_last_finalizer_of_a_deleting_object_drops_it_at_once(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """A real server answers the PATCH that removes the last finalizer of a deleting object
    with that object at the version the cache already holds (the emulator bumps it): the
    cache must not keep the object, with its finalizers, until the DELETED event comes."""
    ns = kube_namespace
    # No watch: only the write path can tell the cache that the object is gone.
    cache = ObjectCache(kube_client, [CachedKind(CONFIG_MAP, {"app": "t"})])
    seen: list[Change] = []
    cache.on_change = seen.append
    body = config_map(ns, "held")
    body["metadata"]["finalizers"] = ["example.com/hold"]  # type: ignore[index]
    cache.observe_write(await kube_client.create(body))
    response = await kube_client.delete(CONFIG_MAP, "held", namespace=ns)
    cache.observe_delete(body, response)
    held = cache.get(CONFIG_MAP, "held", ns)
    assert held is not None
    assert held["metadata"].get("deletionTimestamp")
    released = await kube_client.patch_merge(
        CONFIG_MAP, "held", {"metadata": {"finalizers": None}}, namespace=ns
    )
    assert not released["metadata"].get("finalizers")
    cache.observe_write(released)
    assert cache.get(CONFIG_MAP, "held", ns) is None, (
        f"the released object is still cached (answer at {released['metadata']['resourceVersion']}"
        f", held {held['metadata']['resourceVersion']})"
    )
    assert seen[-1].type == "DELETED"
    # A late echo of an older version cannot bring it back.
    cache.observe_write(held)
    assert cache.get(CONFIG_MAP, "held", ns) is None


def test_namespaces_of_a_cluster_scoped_kind_are_refused() -> None:
    with pytest.raises(ValueError, match="cluster-scoped"):
        CachedKind(NAMESPACE, namespaces=("a",))
    with pytest.raises(ValueError, match="distinct"):
        CachedKind(CONFIG_MAP, namespaces=("a", "a"))


async def test_per_namespace_watches_fill_one_store_and_see_nothing_else(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """``namespaces``: one list+watch per namespace into one store; objects elsewhere never
    reach it, and a relist of one namespace keeps the other's objects."""
    first = kube_namespace
    second, outside = f"{first}-b", f"{first}-out"
    for name in (second, outside):
        await kube_client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    try:
        await kube_client.create(config_map(first, "one"))
        await kube_client.create(config_map(outside, "hidden"))
        kind = CachedKind(CONFIG_MAP, {"app": "t"}, namespaces=(first, second))
        cache = ObjectCache(kube_client, [kind])
        assert sorted(cache.informers) == [f"ConfigMap/{first}", f"ConfigMap/{second}"]
        assert {i.namespace for i in cache.informers.values()} == {first, second}
        cache.start()
        try:
            await cache.synced()
            assert [m["metadata"]["name"] for m in cache.list(CONFIG_MAP)] == ["one"]
            await kube_client.create(config_map(second, "two"))
            await kube_client.create(config_map(outside, "hidden-too"))
            await eventually(lambda: _async(cache.get(CONFIG_MAP, "two", second)), what="two")
            await cache.informers[f"ConfigMap/{second}"].relist()
            names = {
                (m["metadata"]["namespace"], m["metadata"]["name"]) for m in cache.list(CONFIG_MAP)
            }
            assert names == {(first, "one"), (second, "two")}
            await kube_client.delete(CONFIG_MAP, "one", namespace=first)
            await eventually(
                lambda: _async(cache.get(CONFIG_MAP, "one", first) is None), what="deleted"
            )
            assert [m["metadata"]["name"] for m in cache.list(CONFIG_MAP)] == ["two"]
            assert cache.list(CONFIG_MAP, outside) == []
        finally:
            await cache.stop()
    finally:
        for name in (second, outside):
            await kube_client.delete(NAMESPACE, name)


async def test_the_cache_keeps_no_managed_fields(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """The server's objects carry managedFields (on the real API server, one entry per
    writer); the cache keeps everything else of them, from the watch and from own writes."""
    ns = kube_namespace
    watched = await kube_client.create(config_map(ns, "watched"))
    cache = ObjectCache(kube_client, [CachedKind(CONFIG_MAP, {"app": "t"})])
    cache.start()
    try:
        await cache.synced()
        patched = await kube_client.patch_merge(
            CONFIG_MAP, "watched", {"data": {"v": "2"}}, namespace=ns
        )
        cache.observe_write(patched)
        await eventually(
            lambda: _async((cache.get(CONFIG_MAP, "watched", ns) or {}).get("data") == {"v": "2"}),
            what="the patched ConfigMap in the cache",
        )
        held = cache.get(CONFIG_MAP, "watched", ns)
        assert held is not None
        assert "managedFields" not in held["metadata"]
        expected = {k: v for k, v in patched["metadata"].items() if k != "managedFields"}
        assert held["metadata"] == expected
        if "managedFields" in watched["metadata"]:  # the real server; the emulator has none
            assert patched["metadata"]["managedFields"], "the server's object kept them"
    finally:
        await cache.stop()
