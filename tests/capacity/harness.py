"""A whole stack for the shared-capacity tests (ADR 0062): the dev stack's real parts from
:class:`~arcflow.devstack.factory.StackFactory` on the test session's real control plane, one
ARS with three variants, and two observers that see every moment, not snapshots:

- :class:`PodWatch`: a watch on the namespace's pods; a runner pod counts from its ADDED event
  until it is DELETED or reaches a terminal phase (as Kubernetes counts a pod's requests), and
  the largest number (or CPU) counted at once is kept;
- the simulator's ``/_sim/active-peak`` over HTTP: the most jobs (assigned + running) the set's
  scale sets held together at any moment of its history.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import POD, KubeClient
from arcflow.common.quantity import pod_request
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.factory import StackFactory
from arcflow.devstack.supervisor import last_log_line

SECRET_NAME = "github-credentials"
FINISHED = ("Succeeded", "Failed")


def runner_template(cpu: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


@dataclass
class PodWatch:
    """Every runner pod of the namespace from ADDED to DELETED, by a watch."""

    kube: KubeClient
    namespace: str
    ars: str
    variants: tuple[str, ...]
    #: name -> (variant, cpu request)
    live: dict[str, tuple[str, Fraction]] = field(default_factory=dict)
    peak_pods: int = 0
    peak_cpu: Fraction = Fraction(0)
    #: variant -> the resourceVersion each pod was ADDED with (its creation's, for a pod created
    #: while the watch ran): ordered against a LIST's version, unlike the watch's arrival time
    created_versions: dict[str, list[int]] = field(default_factory=dict)
    events: int = 0
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        await asyncio.wait_for(self._ready.wait(), 30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        listed = await self.kube.list(POD, namespace=self.namespace)
        for pod in listed.items:
            if (pod.get("status") or {}).get("phase") not in FINISHED:
                self._add(pod)
        version = listed.resource_version
        self._ready.set()
        while True:  # a watch ends on the server's timeout: resume from the last version
            async with self.kube.watch(
                POD, namespace=self.namespace, resource_version=version, timeout_seconds=240
            ) as stream:
                async for event in stream:
                    self.events += 1
                    version = event.resource_version or version
                    name = event.object.get("metadata", {}).get("name", "")
                    phase = (event.object.get("status") or {}).get("phase")
                    if event.type == "ADDED" and phase not in FINISHED:
                        self._add(event.object)
                    elif event.type == "DELETED" or phase in FINISHED:
                        # A finished pod holds nothing: Kubernetes counts no request of a
                        # pod in a terminal phase (quota, scheduler); the garbage collector
                        # removes it later (ADR 0057).
                        self.live.pop(name, None)

    def _add(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        owners = meta.get("ownerReferences") or []
        if not any(o.get("kind") == "EphemeralRunner" for o in owners):
            return  # not a runner pod
        name = str(meta.get("name", ""))
        variant = next((v for v in self.variants if name.startswith(f"{self.ars}-{v}-")), "")
        cpu = pod_request({"spec": pod.get("spec") or {}}).get("cpu", Fraction(0))
        self.live[meta["name"]] = (variant, cpu)
        self.created_versions.setdefault(variant, []).append(int(meta.get("resourceVersion") or 0))
        self.peak_pods = max(self.peak_pods, len(self.live))
        self.peak_cpu = max(self.peak_cpu, sum((c for _, c in self.live.values()), Fraction(0)))


@dataclass
class CapacityStack:
    """``async with CapacityStack(tmp_path, plane, ars) as stack``: every part up, the ARS
    applied, a session per variant."""

    work_dir: Path
    control_plane: ControlPlane
    ars: dict[str, Any]
    poll_timeout: float = 2.0
    job_duration: float = 1.0
    namespace: str = ""
    sim: ActionsSimulator | None = None
    kube: KubeClient | None = None
    http: httpx.AsyncClient | None = None
    pods: PodWatch | None = None
    #: variant -> jobs queued before the ARS is applied (a backlog moved onto a new set)
    backlog: dict[str, int] = field(default_factory=dict)
    backlog_jobs: dict[str, list[str]] = field(default_factory=dict)
    _exit: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def __aenter__(self) -> CapacityStack:
        try:
            await self._start()
        except BaseException:
            await self._exit.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exit.aclose()

    @property
    def name(self) -> str:
        return str(self.ars["metadata"]["name"])

    async def _start(self) -> None:
        self.namespace = f"cap-{secrets.token_hex(3)}"
        factory = StackFactory(
            kube=self.control_plane,
            poll_timeout=self.poll_timeout,
            job_duration=self.job_duration,
            controller_namespace=f"{self.namespace}-systems",
            namespaces=[self.namespace],
            healthy_within=120,
            kube_request_timeout=10,
            work_dir=self.work_dir,
        )
        parts = await self._exit.enter_async_context(factory)
        self.sim, self.kube = parts.simulator, parts.kube
        assert self.sim is not None
        assert self.kube is not None
        self.http = await self._exit.enter_async_context(
            httpx.AsyncClient(base_url=self.sim.base_url, timeout=10)
        )
        token = self.sim.add_pat()
        await self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET_NAME, "namespace": self.namespace},
                "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
            }
        )
        self.ars["metadata"]["namespace"] = self.namespace
        self.ars["spec"]["githubConfigUrl"] = self.sim.config_url()
        self.ars["spec"]["githubConfigSecret"] = SECRET_NAME
        variants = tuple(v["name"] for v in self.ars["spec"]["runnerVariants"])
        self.pods = PodWatch(self.kube, self.namespace, self.name, variants)
        await self.pods.start()
        self._exit.push_async_callback(self.pods.stop)
        for variant, count in self.backlog.items():
            self.backlog_jobs[variant] = await self.enqueue(variant, count, self.job_duration)
        await self.kube.create(self.ars)
        await self.wait_sessions()

    # --- the simulator over HTTP --------------------------------------------------------
    async def snapshot(self) -> dict[str, Any]:
        assert self.http is not None
        response = await self.http.get("/_sim/snapshot")
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def scale_set_name(self, variant: str) -> str:
        return f"{self.name}-{variant}"

    async def scale_set_ids(self) -> dict[str, int]:
        """variant -> the simulator's scale set id."""
        names = {
            self.scale_set_name(v["name"]): v["name"] for v in self.ars["spec"]["runnerVariants"]
        }
        snapshot = await self.snapshot()
        return {names[s["name"]]: int(s["id"]) for s in snapshot["scaleSets"] if s["name"] in names}

    async def wait_sessions(self, within: float = 90.0) -> None:
        wanted = {self.scale_set_name(v["name"]) for v in self.ars["spec"]["runnerVariants"]}
        deadline = time.monotonic() + within
        with_session: set[str] = set()
        while time.monotonic() < deadline:
            snapshot = await self.snapshot()
            # A session whose first poll has not arrived has no capacity yet: the service
            # would assign it any number of jobs (docs/actions-simulator.md).
            with_session = {
                s["name"]
                for s in snapshot["scaleSets"]
                if s.get("session") and s.get("maxCapacity") is not None
            }
            if wanted <= with_session:
                return
            await asyncio.sleep(0.2)
        raise AssertionError(
            f"no session with a first poll for {sorted(wanted - with_session)} within "
            f"{within}s; last reconciler "
            f"log line: {last_log_line(self.work_dir / 'logs' / 'reconciler.log') or '(none)'}"
        )

    async def enqueue(self, variant: str, count: int, duration: float) -> list[str]:
        assert self.http is not None
        response = await self.http.post(
            "/_sim/jobs", json={"count": count, "labels": [variant], "duration": duration}
        )
        response.raise_for_status()
        return list(response.json()["job_ids"])

    async def jobs(self) -> dict[str, dict[str, Any]]:
        assert self.http is not None
        response = await self.http.get("/_sim/jobs")
        response.raise_for_status()
        body = response.json()
        items = body["jobs"] if isinstance(body, dict) else body
        return {j["jobId"]: j for j in items}

    async def active_peak(self, weights: Mapping[str, float] | None = None) -> dict[str, float]:
        """Peak of assigned + running jobs over the set's scale sets together (weighted per
        variant when ``weights`` is given)."""
        assert self.http is not None
        ids = await self.scale_set_ids()
        query = ",".join(f"{i}:{(weights or {}).get(v, 1.0)}" for v, i in sorted(ids.items()))
        response = await self.http.get("/_sim/active-peak", params={"scaleSets": query})
        response.raise_for_status()
        data: dict[str, float] = response.json()
        return data

    async def ars_doc(self) -> dict[str, Any]:
        assert self.kube is not None
        from arcflow.common.kube import AUTOSCALING_RUNNER_SET

        return await self.kube.get(AUTOSCALING_RUNNER_SET, self.name, self.namespace)
