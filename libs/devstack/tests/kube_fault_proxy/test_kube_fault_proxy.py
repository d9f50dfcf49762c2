"""The fault proxy in front of the session's real kube-apiserver: requests go through with the
caller's identity, chosen ones are refused, delayed or recorded, watches stream and are cut."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from arcflow.common.kube import (
    CONFIG_MAP,
    ConflictError,
    ForbiddenError,
    KubeApiError,
    KubeClient,
    KubeConnectionError,
    KubeSettings,
)
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy, Upstream, parse_target
from arcflow.devstack.nats_server import free_port
from tests.fixtures.kube import EMULATOR, backend
from tests.polling import eventually

pytestmark = pytest.mark.integration

ERS_PLURAL = "ephemeralrunnersets"
ERS_KIND = "EphemeralRunnerSet"


@pytest.fixture
async def proxy(control_plane: ControlPlane) -> AsyncIterator[KubeFaultProxy]:
    if backend() == EMULATOR:
        pytest.skip("the fault proxy stands in front of a real kube-apiserver")
    async with KubeFaultProxy.for_control_plane(control_plane) as started:
        yield started


async def _client(path: Path) -> KubeClient:
    return await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(path), qps=1000, burst=1000, request_timeout=10)
    )


@pytest.fixture
async def via_proxy(proxy: KubeFaultProxy, tmp_path: Path) -> AsyncIterator[KubeClient]:
    """The admin, through the proxy."""
    async with await _client(proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")) as client:
        yield client


def _ers(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 0, "patchID": 0},
    }


def _config_map(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"proxy-test": "1"}},
        "data": {"k": "v"},
    }


def test_requests_are_named_in_kubernetes_terms() -> None:
    ers = "/apis/actions.github.com/v1alpha1/namespaces/ci/ephemeralrunnersets"
    cases = {
        ("GET", ers, ""): ("list", ERS_PLURAL, "ci", None),
        ("GET", ers, "watch=1"): ("watch", ERS_PLURAL, "ci", None),
        ("PATCH", f"{ers}/arc", ""): ("patch", ERS_PLURAL, "ci", "arc"),
        ("PATCH", f"{ers}/arc/status", ""): ("patch", f"{ERS_PLURAL}/status", "ci", "arc"),
        ("POST", "/api/v1/namespaces/ci/pods", ""): ("create", "pods", "ci", "from-body"),
        ("DELETE", "/api/v1/namespaces/ci", ""): ("delete", "namespaces", "ci", "ci"),
        ("GET", "/api/v1/pods", "watch=true"): ("watch", "pods", None, None),
        ("GET", "/version", ""): ("list", None, None, None),
    }
    for (method, path, query), want in cases.items():
        parsed = dict(p.split("=") for p in query.split("&") if p)
        got = parse_target(method, path, parsed, "from-body")
        assert (got.verb, got.resource, got.namespace, got.name) == want, (method, path)


async def test_requests_pass_through_and_are_recorded(
    proxy: KubeFaultProxy, via_proxy: KubeClient, kube_client: KubeClient, kube_namespace: str
) -> None:
    await via_proxy.create(_ers("arc", kube_namespace))
    patched = await via_proxy.patch_merge(
        "EphemeralRunnerSet", "arc", {"spec": {"replicas": 2}}, namespace=kube_namespace
    )
    assert patched["spec"]["replicas"] == 2
    # The real server has it (read past the proxy).
    stored = await kube_client.get("EphemeralRunnerSet", "arc", kube_namespace)
    assert stored["spec"]["replicas"] == 2
    path = f"/apis/actions.github.com/v1alpha1/namespaces/{kube_namespace}/{ERS_PLURAL}/arc"
    patches = [r for r in proxy.requests if r.method == "PATCH" and r.path == path]
    assert [(r.content_type, r.status) for r in patches] == [("application/merge-patch+json", 200)]
    creates = [r for r in proxy.requests if r.method == "POST" and r.path.endswith(ERS_PLURAL)]
    assert [r.status for r in creates] == [201]


async def test_a_token_keeps_its_own_identity_and_rbac(
    proxy: KubeFaultProxy,
    control_plane: ControlPlane,
    kube_client: KubeClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    await kube_client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
        namespace=kube_namespace,
    )
    token = await asyncio.to_thread(control_plane.create_token, kube_namespace, "reader")
    path = proxy.write_kubeconfig(tmp_path / "reader.kubeconfig", token=token)
    assert token not in repr(proxy.requests)
    async with await _client(path) as reader:
        with pytest.raises(ForbiddenError):  # not the admin: no Role yet
            await reader.list(CONFIG_MAP, namespace=kube_namespace)
        await kube_client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "read-config-maps"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
            },
            namespace=kube_namespace,
        )
        await kube_client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "reader"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "read-config-maps",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "reader", "namespace": kube_namespace}
                ],
            },
            namespace=kube_namespace,
        )

        async def can_list() -> bool:
            try:
                await reader.list(CONFIG_MAP, namespace=kube_namespace)
            except ForbiddenError:
                return False
            return True

        await eventually(can_list, what="the RoleBinding lets the reader list")
        with pytest.raises(ForbiddenError):  # listing only: the Role grants no create
            await reader.create(_config_map("nope", kube_namespace))


async def test_injected_errors_refuse_the_chosen_requests_only(
    proxy: KubeFaultProxy, via_proxy: KubeClient, kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(_ers("arc", kube_namespace))
    conflict = proxy.inject_error(
        verb="patch", resource=ERS_PLURAL, status=409, reason="Conflict", times=2
    )
    patch = {"spec": {"replicas": 3}}
    for _ in range(2):
        with pytest.raises(ConflictError) as caught:
            await via_proxy.patch_merge(ERS_KIND, "arc", patch, namespace=kube_namespace)
        assert caught.value.status == 409
    stored = await kube_client.get("EphemeralRunnerSet", "arc", kube_namespace)
    assert stored["spec"]["replicas"] == 0  # refused ones never reached the server
    await via_proxy.patch_merge(ERS_KIND, "arc", patch, namespace=kube_namespace)
    assert conflict.hits == 2
    assert conflict.exhausted
    stored = await kube_client.get(ERS_KIND, "arc", kube_namespace)
    assert stored["spec"]["replicas"] == 3

    # 500 on the next list of pods in this namespace; a get of a ConfigMap is untouched.
    proxy.inject_error(
        verb="list", resource="pods", namespace=kube_namespace, status=500,
        reason="InternalError", times=1,
    )  # fmt: skip
    with pytest.raises(KubeApiError) as failed:
        await via_proxy.list("Pod", namespace=kube_namespace)
    assert failed.value.status == 500
    assert (await via_proxy.list("Pod", namespace=kube_namespace)).items == []

    # 429 with Retry-After, by path glob, seen as a raw client sees it.
    throttle = proxy.inject_error(
        path="/api/v1/namespaces/*/configmaps", status=429, reason="TooManyRequests",
        retry_after=3,
    )  # fmt: skip
    url = f"{proxy.url}/api/v1/namespaces/{kube_namespace}/configmaps"
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        body = await response.json()
        assert (response.status, response.headers["Retry-After"]) == (429, "3")
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "TooManyRequests", 429)
    throttle.remove()
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200
    statuses = [r.status for r in proxy.requests if r.path.endswith("/configmaps")]
    assert statuses == [429, 200]


async def test_delayed_requests_wait(proxy: KubeFaultProxy, via_proxy: KubeClient) -> None:
    proxy.delay(0.5, verb="get", resource="namespaces", times=1)
    started = time.monotonic()
    await via_proxy.get("Namespace", "default")
    assert time.monotonic() - started >= 0.5
    started = time.monotonic()
    await via_proxy.get("Namespace", "default")
    assert time.monotonic() - started < 0.5


async def test_held_watches_go_on_when_released(
    proxy: KubeFaultProxy, via_proxy: KubeClient, kube_client: KubeClient, kube_namespace: str
) -> None:
    await _root_ca_published(kube_client, kube_namespace)
    hold = proxy.delay(None, verb="watch", resource="configmaps")
    listed = await via_proxy.list(CONFIG_MAP, namespace=kube_namespace)
    stream = via_proxy.watch(
        CONFIG_MAP, namespace=kube_namespace, resource_version=listed.resource_version
    )
    async with stream:
        first = asyncio.ensure_future(_next(stream))
        await eventually(lambda: _true(hold.hits == 1), what="the watch held at the proxy")
        await kube_client.create(_config_map("while-held", kube_namespace))
        assert not first.done()
        assert proxy.open_watches == 0
        hold.remove()
        event = await first  # from the listed version: the change made while held arrives
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "while-held")


async def _root_ca_published(kube: KubeClient, namespace: str) -> None:
    """kube-controller-manager adds ``kube-root-ca.crt`` to a new namespace a moment after it is
    made: wait for it, so the watch from the listed version sees only the test's ConfigMaps."""

    async def published() -> bool:
        names = {
            c["metadata"]["name"] for c in (await kube.list(CONFIG_MAP, namespace=namespace)).items
        }
        return "kube-root-ca.crt" in names

    await eventually(published, what=f"kube-root-ca.crt in {namespace}")


async def _next(stream: Any) -> Any:
    return await asyncio.wait_for(stream.__anext__(), 10)


@pytest.mark.parametrize("abrupt", [False, True])
async def test_watches_stream_event_by_event_and_are_cut(
    proxy: KubeFaultProxy, via_proxy: KubeClient, kube_client: KubeClient, kube_namespace: str,
    abrupt: bool,
) -> None:  # fmt: skip
    await _root_ca_published(kube_client, kube_namespace)
    listed = await via_proxy.list(CONFIG_MAP, namespace=kube_namespace)
    stream = via_proxy.watch(
        CONFIG_MAP, namespace=kube_namespace, resource_version=listed.resource_version
    )
    async with stream:
        first = asyncio.ensure_future(_next(stream))
        await eventually(
            lambda: _true(proxy.watches("configmaps")), what="the watch open at the proxy"
        )
        await kube_client.create(_config_map("one", kube_namespace))
        event = await first
        # One event while the stream stays open: forwarded as it came, not at the end.
        assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "one")
        assert proxy.open_watches >= 1
        await kube_client.create(_config_map("two", kube_namespace))
        event = await _next(stream)
        assert event.object["metadata"]["name"] == "two"
        assert proxy.drop_watches(abrupt=abrupt, resource="configmaps") == 1
        with pytest.raises(StopAsyncIteration):  # the client sees its stream end
            await _next(stream)
    assert proxy.watches("configmaps") == []


async def _true(value: Any) -> Any:
    return value


async def test_a_dead_upstream_is_a_connection_error(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    if backend() == EMULATOR:
        pytest.skip("needs a real control plane")
    closed = Upstream(f"https://127.0.0.1:{free_port()}", control_plane.credentials.ca)
    async with KubeFaultProxy(closed) as proxy:
        async with await _client(proxy.write_kubeconfig(tmp_path / "kubeconfig")) as client:
            with pytest.raises(KubeConnectionError):
                await client.get("Namespace", "default")
        # (the client may retry a reset connection once)
        assert proxy.requests
        assert {r.status for r in proxy.requests} == {None}
