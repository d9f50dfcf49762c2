"""The registrar's declared subscriptions, on FastStream's in-memory TestNatsBroker: change
events enqueue the key of the right ARS, through the same subscribers the runtime builds."""

from __future__ import annotations

from types import SimpleNamespace

from faststream.nats import TestNatsBroker

from arcflow.common import subjects
from arcflow.common.constants import LABEL_SCALE_SET_NAME
from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats import NatsSettings, make_broker, publish_event
from arcflow.common.reconcile.manager import Manager
from arcflow.common.service.subscribers import attach_subscription
from arcflow.registrar.controller import DECLARED
from arcflow.registrar.service import SERVICE
from arcflow.registrar.settings import RegistrarSettings
from tests.polling import eventually


def _change(resource: str, name: str, change: str, **fields: object) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="watcher",
        api_version="actions.github.com/v1alpha1",
        kind="X",
        resource=resource,
        namespace="arc",
        name=name,
        uid=f"uid-{name}-{change}",
        change=change,  # type: ignore[arg-type]
        resource_version="1",
        **fields,  # type: ignore[arg-type]
    )


async def test_ars_and_deleted_ers_changes_enqueue_their_ars() -> None:
    converged: list[tuple[str, str, str]] = []
    seen: list[str] = []

    def enqueue(namespace: str, name: str, *, trigger: str, seen_version: str = "") -> None:
        converged.append((namespace, name, trigger))
        seen.append(seen_version)

    state = SimpleNamespace(enqueue=enqueue, manager=Manager(DECLARED, lambda _m: None))
    broker = make_broker(NatsSettings(), "registrar")
    for subscription in SERVICE.subscriptions:
        attach_subscription(
            broker,
            subscription,
            state,
            RegistrarSettings(),
            service="registrar",
            inbox_prefix="_INBOX_registrar",
            dead_letter_target=None,
        )
    ers_labels = {"labels": {LABEL_SCALE_SET_NAME: "big"}}
    events = [
        _change("autoscalingrunnersets", "big", "MODIFIED"),
        _change("ephemeralrunnersets", "big-gpu", "MODIFIED", **ers_labels),  # ignored: alive
        _change("ephemeralrunnersets", "big-cpu", "DELETED", **ers_labels),
    ]
    async with TestNatsBroker(broker) as test_broker:
        for event in events:
            subject = subjects.k8s_subject(event.resource, event.namespace, event.name)
            await publish_event(test_broker, subject, event)

        async def both_converged() -> bool:  # handled by the subscription's workers
            return len(converged) == 2

        await eventually(both_converged, within=5)
    assert converged == [
        ("arc", "big", "autoscalingrunnersets"),
        ("arc", "big", "ephemeralrunnersets"),
    ]
    assert seen == ["1", ""], "an ERS event's version is not the ARS's"
