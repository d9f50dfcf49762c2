"""Metadata-only lists and watches (ADR 0126) on a real kube-apiserver: what the watcher reads.

The server answers ``PartialObjectMetadata``: every object's metadata, no spec, no status and,
for a Secret, no data, while every change still arrives as a watch event with its new
resourceVersion.
"""

from __future__ import annotations

import asyncio
import base64

import pytest

from arcflow.common.kube import SECRET, KubeClient, WatchStream
from tests.fixtures.kube import APISERVER, backend

pytestmark = pytest.mark.integration

LABELS = {"arcflow-test": "metadata-only"}
SECRET_VALUE = "not-for-the-watcher"
ENCODED = base64.b64encode(SECRET_VALUE.encode()).decode()
RUNNER = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunner",
    "metadata": {"name": "arc-cpu-m1", "labels": LABELS},
    "spec": {
        "githubConfigUrl": "https://github.com/example-org",
        "githubConfigSecret": "arc-cpu",
        "runnerScaleSetId": 1,
    },
}


def _secret(value: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "jit-m1", "labels": LABELS},
        "data": {"jitConfig": base64.b64encode(value.encode()).decode()},
    }


@pytest.fixture(autouse=True)
def _real_server_only() -> None:
    if backend() != APISERVER:
        pytest.skip("PartialObjectMetadata is a real server's answer (the emulator: whole objects)")


async def test_a_metadata_only_list_has_no_spec_status_or_data(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(_secret(SECRET_VALUE), namespace=kube_namespace)
    await kube_client.create(RUNNER, namespace=kube_namespace)
    await kube_client.patch_status(
        "EphemeralRunner", "arc-cpu-m1", {"phase": "Running"}, namespace=kube_namespace
    )
    for resource, name in ((SECRET, "jit-m1"), ("EphemeralRunner", "arc-cpu-m1")):
        whole = await kube_client.list(resource, namespace=kube_namespace, label_selector=LABELS)
        slim = await kube_client.list(
            resource, namespace=kube_namespace, label_selector=LABELS, metadata_only=True
        )
        assert [i["metadata"]["name"] for i in slim.items] == [name]
        item = slim.items[0]
        assert item["kind"] == "PartialObjectMetadata"
        assert set(item) == {"kind", "apiVersion", "metadata"}, item.keys()
        assert item["metadata"]["uid"] == whole.items[0]["metadata"]["uid"]
        assert item["metadata"]["labels"] == LABELS
        assert item["metadata"]["resourceVersion"] == whole.items[0]["metadata"]["resourceVersion"]
        assert slim.resource_version
        assert ENCODED not in repr(slim.items)
        # The control: the whole object has what the metadata-only one left out.
        assert ENCODED in repr(whole.items) if resource == SECRET else "status" in whole.items[0]


async def test_a_metadata_only_watch_sees_every_change_without_the_content(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """A change to a Secret's data or a runner's status alone still arrives (as MODIFIED with
    the new resourceVersion); the event holds neither."""
    await kube_client.create(_secret("first"), namespace=kube_namespace)
    await kube_client.create(RUNNER, namespace=kube_namespace)
    listed = await kube_client.list(SECRET, namespace=kube_namespace, label_selector=LABELS)
    runners = await kube_client.list(
        "EphemeralRunner", namespace=kube_namespace, label_selector=LABELS
    )

    def watch(resource: str, rv: str) -> WatchStream:
        return kube_client.watch(
            resource,
            namespace=kube_namespace,
            label_selector=LABELS,
            resource_version=rv,
            metadata_only=True,
        )

    async with (
        watch(SECRET.kind, listed.resource_version) as secrets,
        watch("EphemeralRunner", runners.resource_version) as runner_events,
    ):
        changed = await kube_client.patch_merge(
            SECRET,
            "jit-m1",
            {"data": {"jitConfig": ENCODED}},
            namespace=kube_namespace,
        )
        status = await kube_client.patch_status(
            "EphemeralRunner", "arc-cpu-m1", {"phase": "Running"}, namespace=kube_namespace
        )
        for stream, want in (
            (secrets, changed["metadata"]["resourceVersion"]),
            (runner_events, status["metadata"]["resourceVersion"]),
        ):
            async with asyncio.timeout(20):  # the change's event, past any bookmark
                event = await anext(stream)
                while event.type == "BOOKMARK":
                    event = await anext(stream)
            assert (event.type, event.resource_version) == ("MODIFIED", want), (
                f"waited for the MODIFIED event of resourceVersion {want}, got {event}"
            )
            assert set(event.object) == {"kind", "apiVersion", "metadata"}
            assert ENCODED not in repr(event.object)
