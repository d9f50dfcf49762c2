"""Scripted admission refusals (``KubeEmulator.inject_error``) seen through ``KubeClient``:
the typed error, the Status message and details, ``times``, removal, and that other verbs,
resources, namespaces and names are served normally."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from arcflow.common.kube import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    KubeApiError,
    KubeClient,
)
from arcflow.devstack.kube_emulator import KubeEmulator

pytestmark = pytest.mark.integration

QUOTA = (
    'pods "runner-a" is forbidden: exceeded quota: compute-resources, requested: cpu=8, '
    "used: cpu=0, limited: cpu=4"
)


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "runner", "image": "busybox"}]},
    }


def _config_map(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
    }


async def test_forbidden_create_maps_to_forbidden_error_with_the_status_message(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    injected = kube_emulator.inject_error(
        verb="create", resource="pods", status=403, reason="Forbidden", message=QUOTA
    )
    with pytest.raises(ForbiddenError) as caught:
        await kube_client.create(_pod("runner-a", kube_namespace))
    error = caught.value
    assert (error.status, error.reason, error.message) == (403, "Forbidden", QUOTA)
    assert error.details == {"name": "runner-a", "kind": "pods"}
    assert injected.hits == 1
    # Recorded like any request.
    last = kube_emulator.requests[-1]
    assert (last.method, last.path) == ("POST", f"/api/v1/namespaces/{kube_namespace}/pods")
    assert (await kube_client.list("Pod", namespace=kube_namespace)).items == []  # not stored


async def test_the_body_is_a_real_status_object(
    kube_emulator: KubeEmulator, kube_namespace: str
) -> None:
    kube_emulator.inject_error(
        verb="create",
        resource="pods",
        status=422,
        reason="Invalid",
        message='Pod "p" is invalid: spec.containers[0].image: Required value',
    )
    async with aiohttp.ClientSession() as http:
        url = f"{kube_emulator.url}/api/v1/namespaces/{kube_namespace}/pods"
        async with http.post(url, json=_pod("p", kube_namespace)) as response:
            assert response.status == 422
            assert response.content_type == "application/json"
            body = json.loads(await response.read())
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Pod "p" is invalid: spec.containers[0].image: Required value',
        "reason": "Invalid",
        "code": 422,
        "details": {"name": "p", "kind": "pods"},
    }


async def test_invalid_maps_to_invalid_error(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    kube_emulator.inject_error(
        verb="create", resource="pods", status=422, reason="Invalid", message="bad pod"
    )
    with pytest.raises(InvalidError) as caught:
        await kube_client.create(_pod("p", kube_namespace))
    assert caught.value.message == "bad pod"


async def test_times_is_honoured_then_requests_are_served(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    injected = kube_emulator.inject_error(
        verb="create",
        resource="pods",
        status=403,
        reason="Forbidden",
        message="violates PodSecurity",
        times=2,
    )
    for _ in range(2):
        with pytest.raises(ForbiddenError):
            await kube_client.create(_pod("p", kube_namespace))
    created = await kube_client.create(_pod("p", kube_namespace))
    assert created["metadata"]["uid"]
    assert injected.hits == 2
    assert injected.exhausted
    refused = [r for r in kube_emulator.requests if r.method == "POST" and r.path.endswith("/pods")]
    assert len(refused) == 3  # two refused and one served, all recorded


async def test_other_verbs_resources_namespaces_and_names_are_unaffected(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(_pod("existing", kube_namespace))
    injected = kube_emulator.inject_error(
        verb="create",
        resource="pods",
        namespace=kube_namespace,
        name_prefix="runner-",
        status=403,
        reason="Forbidden",
        message="refused",
    )
    # Other verbs on pods, another resource, another namespace, another name: all served.
    assert (await kube_client.get("Pod", "existing", kube_namespace))["metadata"]["name"]
    assert len((await kube_client.list("Pod", namespace=kube_namespace)).items) == 1
    await kube_client.patch_merge(
        "Pod", "existing", {"metadata": {"labels": {"a": "b"}}}, namespace=kube_namespace
    )
    await kube_client.create(_config_map("runner-cm", kube_namespace))
    await kube_client.create(_pod("runner-x", "elsewhere"))
    await kube_client.create(_pod("other", kube_namespace))
    assert injected.hits == 0
    with pytest.raises(ForbiddenError):
        await kube_client.create(_pod("runner-y", kube_namespace))
    await kube_client.delete("Pod", "existing", namespace=kube_namespace)
    assert injected.hits == 1


async def test_generate_name_matches_the_prefix(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    kube_emulator.inject_error(
        verb="create",
        resource="pods",
        name_prefix="runner-",
        status=403,
        reason="Forbidden",
        message="refused",
    )
    pod = _pod("", kube_namespace)
    pod["metadata"] = {"generateName": "runner-", "namespace": kube_namespace}
    with pytest.raises(ForbiddenError):
        await kube_client.create(pod)


async def test_subresources_and_other_verbs_are_targeted_separately(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(_pod("p", kube_namespace))
    kube_emulator.inject_error(
        verb="patch", resource="pods/status", status=409, reason="Conflict", message="busy"
    )
    kube_emulator.inject_error(
        verb="delete", resource="pods", status=500, reason="InternalError", message="etcd down"
    )
    # The main resource is not the status subresource.
    await kube_client.patch_merge(
        "Pod", "p", {"metadata": {"labels": {"a": "b"}}}, namespace=kube_namespace
    )
    with pytest.raises(ConflictError) as conflict:
        await kube_client.patch_status("Pod", "p", {"phase": "Running"}, namespace=kube_namespace)
    assert not conflict.value.already_exists
    with pytest.raises(KubeApiError) as internal:
        await kube_client.delete("Pod", "p", namespace=kube_namespace)
    assert (internal.value.status, internal.value.message) == (500, "etcd down")


async def test_remove_and_clear_errors(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    first = kube_emulator.inject_error(
        verb="create", resource="pods", status=403, reason="Forbidden", message="one"
    )
    kube_emulator.inject_error(
        verb="create", resource="pods", status=403, reason="Forbidden", message="two"
    )
    with pytest.raises(ForbiddenError) as caught:
        await kube_client.create(_pod("p", kube_namespace))
    assert caught.value.message == "one"  # the first matching injection wins
    first.remove()
    with pytest.raises(ForbiddenError) as caught:
        await kube_client.create(_pod("p", kube_namespace))
    assert caught.value.message == "two"
    kube_emulator.clear_errors()
    assert (await kube_client.create(_pod("p", kube_namespace)))["metadata"]["name"] == "p"


async def test_list_and_watch_can_be_refused(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    kube_emulator.inject_error(
        verb="watch",
        resource="configmaps",
        status=403,
        reason="Forbidden",
        message="cannot watch",
        times=1,
    )
    assert (await kube_client.list("ConfigMap", namespace=kube_namespace)).items == []

    async def drain() -> None:
        stream = kube_client.watch("ConfigMap", namespace=kube_namespace, timeout_seconds=1)
        async with stream:
            async for _ in stream:
                pass

    with pytest.raises(ForbiddenError):
        await drain()
    await drain()  # times=1: the next watch is served (and ends after its timeout)


@pytest.mark.parametrize(
    ("overrides", "complaint"),
    [
        ({"verb": "frobnicate"}, "verb must be one of"),
        ({"resource": "Pods"}, "lower-case plural"),
        ({"status": 200}, "HTTP error code"),
        ({"reason": ""}, "reason is required"),
        ({"times": 0}, "at least 1"),
    ],
)
def test_bad_injections_are_refused_with_the_reason(
    kube_emulator: KubeEmulator, overrides: dict[str, Any], complaint: str
) -> None:
    arguments: dict[str, Any] = {
        "verb": "create",
        "resource": "pods",
        "status": 403,
        "reason": "Forbidden",
        "message": "m",
    }
    arguments.update(overrides)
    with pytest.raises(ValueError, match=complaint):
        kube_emulator.inject_error(**arguments)
