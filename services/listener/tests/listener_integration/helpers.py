"""Shared set-up for the listener integration tests: simulator scale sets, ERS objects, config."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from arcflow.common.actions import ActionsClient, Label, PatCredentials, RetryPolicy, RunnerScaleSet
from arcflow.common.events import JobInfo, JobsBatch, JobStatistics
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.listener_config import ListenerConfig, ScaleSetConfig
from arcflow.common.nats import NatsSettings
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.listener.app import Listener, ListenerOptions
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.service import SERVICE
from arcflow.listener.settings import ListenerSettings
from arcflow.listener.supervisor import Backoff
from tests import polling

T = TypeVar("T")

ARS = "arc"


@dataclass(frozen=True)
class Variant:
    name: str
    min_runners: int
    max_runners: int

    def ers(self, ars: str) -> str:
        return f"{ars}-{self.name}"

    @property
    def label(self) -> str:
        return f"self-hosted-{self.name}"


async def eventually(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], *, within: float = 15.0
) -> T:
    """Poll ``probe`` until ``ok`` holds on its value; fail with the last value seen."""

    async def check() -> tuple[T]:
        value = await probe()
        assert ok(value), f"last value: {value!r}"
        return (value,)  # truthy even when the value itself is falsy

    found: tuple[T] = await polling.eventually(check, within=within)
    return found[0]


async def create_scale_sets(
    sim: ActionsSimulator, token: str, ars: str, variants: list[Variant]
) -> dict[str, int]:
    """Register one simulator scale set per variant (labelled ``self-hosted-<variant>``)."""
    ids: dict[str, int] = {}
    async with ActionsClient(
        sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
    ) as client:
        for variant in variants:
            created = await client.create_runner_scale_set(
                RunnerScaleSet(name=variant.ers(ars), labels=[Label(name=variant.label)])
            )
            ids[variant.name] = created.id
    return ids


async def create_runner_sets(
    kube: KubeClient, namespace: str, ars: str, variants: list[Variant]
) -> None:
    for variant in variants:
        await kube.create(
            {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "EphemeralRunnerSet",
                "metadata": {"name": variant.ers(ars), "namespace": namespace},
                "spec": {"replicas": 0, "patchID": 0},  # what the CRD requires
            }
        )


async def ers_specs(
    kube: KubeClient, namespace: str, ars: str, variants: list[Variant]
) -> dict[str, Any]:
    specs = {}
    for variant in variants:
        obj = await kube.get("EphemeralRunnerSet", variant.ers(ars), namespace)
        specs[variant.name] = obj.get("spec", {})
    return specs


def multi_config(
    sim: ActionsSimulator,
    token: str,
    namespace: str,
    ars: str,
    variants: list[Variant],
    ids: dict[str, int],
    **extra: Any,
) -> ListenerConfig:
    return ListenerConfig(
        configure_url=sim.config_url(),
        github_token=token,
        ephemeral_runner_set_namespace=namespace,
        runner_scale_set_name=ars,
        scale_sets=[
            ScaleSetConfig(
                runner_scale_set_id=ids[v.name],
                runner_scale_set_name=v.ers(ars),
                ephemeral_runner_set_name=v.ers(ars),
                min_runners=v.min_runners,
                max_runners=v.max_runners,
            )
            for v in variants
        ],
        **extra,
    )


def listener_options(nats_url: str, kubeconfig: Path, **overrides: Any) -> ListenerOptions:
    options = ListenerOptions(
        backoff=Backoff(initial=0.05, cap=0.2, jitter=0.0),
        retry=RetryPolicy.fast(max_retries=1),
        host="listener-pod",
        kube_settings=KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000),
        nats=NatsSettings(url=nats_url),
        environ={},
    )
    for key, value in overrides.items():
        setattr(options, key, value)
    return options


def listener_runtime(listener: Listener) -> ServiceRuntime:
    """The listener's spec on the service runtime (as ``python -m arcflow.listener`` runs it),
    in this process, with ``listener`` as its state."""
    settings = ListenerSettings.resolve(listener.config, listener.raw_config, listener.options)
    return ServiceRuntime(SERVICE, settings, overrides={"listener": listener})


async def run_listener(listener: Listener, stop: asyncio.Event) -> None:
    """Run ``listener`` on the runtime until ``stop``; a failure raises ServiceFailedError
    with the listener's error as its cause."""
    await listener_runtime(listener).run(stop)


class RunningListener:
    """``async with RunningListener(listener):`` runs it in a task and stops it cleanly."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Listener:
        self.task = asyncio.ensure_future(run_listener(self.listener, self.stop))
        return self.listener

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 15)


async def ready(value: T) -> T:
    """A value already at hand, as the awaitable ``eventually`` polls."""
    return value


@dataclass(frozen=True)
class ListenerRig:
    """What a listener test stands on: the simulator, a Kubernetes namespace, a private
    nats-server and a kubeconfig the listener reads; the methods fill in those parts."""

    sim: ActionsSimulator
    kube: KubeClient
    namespace: str
    nats_url: str
    kubeconfig: Path

    async def register(self, variants: list[Variant]) -> tuple[str, dict[str, int]]:
        """A fresh PAT, one simulator scale set and one ERS per variant: (token, ids)."""
        token = self.sim.add_pat()
        ids = await create_scale_sets(self.sim, token, ARS, variants)
        await create_runner_sets(self.kube, self.namespace, ARS, variants)
        return token, ids

    def config(
        self, token: str, variants: list[Variant], ids: dict[str, int], **extra: Any
    ) -> ListenerConfig:
        return multi_config(self.sim, token, self.namespace, ARS, variants, ids, **extra)

    def single_config(self, token: str, variant: Variant, ids: dict[str, int]) -> ListenerConfig:
        """Upstream's single-set shape (no ``scale_sets``) for one registered variant."""
        return self.config(token, [variant], ids).model_copy(
            update={
                "scale_sets": [],
                "ephemeral_runner_set_name": variant.ers(ARS),
                "runner_scale_set_id": ids[variant.name],
                "max_runners": variant.max_runners,
            }
        )

    def options(self, **overrides: Any) -> ListenerOptions:
        return listener_options(self.nats_url, self.kubeconfig, **overrides)

    async def ers_specs(self, variants: list[Variant]) -> dict[str, Any]:
        return await ers_specs(self.kube, self.namespace, ARS, variants)


async def stream_events(nats_url: str, subject: str) -> list[tuple[dict[str, str], bytes]]:
    """Every stored message on ``subject`` (headers, data), read with an ordered consumer."""
    import nats
    import nats.errors

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        sub = await js.subscribe(subject, ordered_consumer=True)
        out: list[tuple[dict[str, str], bytes]] = []
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                return out
            out.append((dict(msg.headers or {}), bytes(msg.data)))
    finally:
        await nc.close()


def jobs_batch(
    target: ScaleSetTarget, session_id: str, message_id: int, assigned: int, *jobs: JobInfo
) -> JobsBatch:
    """A batch as the pump of ``target`` publishes it: GitHub message ``message_id`` of
    ``session_id`` with ``assigned`` jobs in its statistics."""
    return JobsBatch(
        source="listener",
        keys=target.event_keys,
        scale_set_id=target.scale_set_id,
        message_id=message_id,
        statistics=JobStatistics(total_assigned_jobs=assigned),
        jobs=list(jobs),
        session_id=session_id,
    )
