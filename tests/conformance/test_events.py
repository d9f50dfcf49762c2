"""core/v1 Events emitted for an object."""

from __future__ import annotations

import pytest

from arcflow.common.kube import POD, KubeClient

pytestmark = pytest.mark.integration


async def test_events_are_recorded_for_an_object(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    pod = await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": kube_namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
    )
    event = await kube_client.emit_event(pod, "Scheduled", "placed on the emulator", type="Normal")
    listed = await kube_client.list(
        "Event", namespace=kube_namespace, field_selector="involvedObject.name=p"
    )
    assert [e["metadata"]["name"] for e in listed.items] == [event["metadata"]["name"]]
    assert listed.items[0]["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert listed.items[0]["reason"] == "Scheduled"
    assert (await kube_client.get(POD, "p", kube_namespace))["metadata"]["name"] == "p"
