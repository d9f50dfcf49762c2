"""Events routed to the keys of the objects they concern."""

from __future__ import annotations

from arcflow.common.events import EventKeys, K8sObjectChanged, OwnerRef, ScaleSetAssigned
from arcflow.reconciler.keys import Key
from arcflow.reconciler.routing import keys_for


def test_routing() -> None:
    pod = K8sObjectChanged(
        source="w",
        api_version="v1",
        kind="Pod",
        resource="pods",
        namespace="arc",
        name="big-runner-abc",
        uid="u",
        change="MODIFIED",
        resource_version="1",
        owner_references=[
            OwnerRef(api_version="x", kind="EphemeralRunner", name="big-runner-abc", uid="o")
        ],
    )
    assert keys_for(pod, "ctl") == [Key("er", "arc", "big-runner-abc")]
    ers = pod.model_copy(
        update={
            "resource": "ephemeralrunnersets",
            "name": "big-gpu",
            "owner_references": [],
            "labels": {
                "actions.github.com/scale-set-name": "big",
                "actions.github.com/scale-set-namespace": "arc",
            },
        }
    )
    assert keys_for(ers, "ctl") == [Key("ers", "arc", "big-gpu"), Key("ars", "arc", "big")]
    assigned = ScaleSetAssigned(
        source="registrar",
        keys=EventKeys(namespace="arc", ars="big", variant="gpu"),
        variant="gpu",
        scale_set_id=3,
        scale_set_name="big-gpu",
        runner_group_id=1,
        runner_group_name="Default",
    )
    assert keys_for(assigned, "ctl") == [Key("ars", "arc", "big")]
