"""Where the time goes between applying many ARSs and every listener session being open.

Not a test and not part of the product: the P5 benchmark (``scale.py``) records, per object,
the wall-clock time each stage was first seen, and reports for every stage when 50 %, 90 %
and 100 % of its objects had got there (seconds after the apply started):

* ``scale_set_registered``: the simulator answered a scale set create (201);
* ``ers_created`` / ``al_created`` / ``listener_pod_created``: first seen on a watch;
* ``listener_pod_running``: the pod's ``phase: Running`` first seen on the watch;
* ``process_started``: the pod runner spawned the listener process (real listeners only);
* ``session_created``: the simulator answered a message session create (201);
* ``first_poll_answered``: the simulator answered the first message poll of a scale set.

Per listener it also reports the lag of each hop (AL -> pod -> process -> its sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arcflow.common.kube import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER_SET, POD, KubeClient
from arcflow.devstack.pod_spec import classify_pod

_SET_CREATE = re.compile(r"/_apis/runtime/runnerscalesets$")
_SESSION = re.compile(r"/_apis/runtime/runnerscalesets/(\d+)/sessions$")
_MESSAGES = re.compile(r"/_apis/runtime/runnerscalesets/(\d+)/messages$")


@dataclass
class Timeline:
    """First-seen wall-clock times per stage and object."""

    started: float = field(default_factory=time.time)
    stages: dict[str, dict[str, float]] = field(default_factory=dict)

    def mark(self, stage: str, key: str, at: float | None = None) -> None:
        self.stages.setdefault(stage, {}).setdefault(key, time.time() if at is None else at)

    def observe_request(self, method: str, path: str, status: int, at: float) -> None:
        """One simulator answer (see :class:`RecordingRequests`)."""
        if status >= 300:
            return
        if method == "POST" and _SET_CREATE.search(path):
            self.mark(
                "scale_set_registered", f"#{len(self.stages.get('scale_set_registered', {}))}", at
            )
        elif method == "POST" and (m := _SESSION.search(path)):
            self.mark("session_created", m.group(1), at)
        elif method == "GET" and (m := _MESSAGES.search(path)):
            self.mark("first_poll_answered", m.group(1), at)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per stage: objects seen, and seconds after the start until 50/90/100 % were."""
        out: dict[str, dict[str, float]] = {}
        for stage, seen in self.stages.items():
            times = sorted(t - self.started for t in seen.values())
            out[stage] = {
                "n": len(times),
                "p50": round(_quantile(times, 0.5), 1),
                "p90": round(_quantile(times, 0.9), 1),
                "last": round(times[-1], 1),
            }
        return out


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class RecordingRequests(deque):  # type: ignore[type-arg]
    """A drop-in for the simulator's request log that also feeds a :class:`Timeline`."""

    def __init__(self, timeline: Timeline, maxlen: int = 20_000) -> None:
        super().__init__(maxlen=maxlen)
        self.timeline = timeline

    def append(self, record: Any) -> None:
        super().append(record)
        self.timeline.observe_request(record.method, record.path, record.status, record.at)


async def watch_stages(kube: KubeClient, timeline: Timeline, namespaces: dict[str, str]) -> None:
    """Watch ERSs (``namespaces['runners']``), ALs and Pods (``namespaces['controller']``)
    until cancelled, marking when each object (and each pod's Running) was first seen."""

    async def one(resource: Any, namespace: str, on_event: Callable[[Any], None]) -> None:
        version = (await kube.list(resource, namespace=namespace)).resource_version
        while True:
            with contextlib.suppress(Exception):
                async with kube.watch(resource, namespace=namespace, resource_version=version) as s:
                    async for event in s:
                        version = event.resource_version or version
                        on_event(event)
            await asyncio.sleep(0.2)

    def name_of(event: Any) -> str:
        return str((event.object.get("metadata") or {}).get("name"))

    def on_pod(event: Any) -> None:
        if classify_pod(event.object) != "listener":
            return
        timeline.mark("listener_pod_created", name_of(event))
        if (event.object.get("status") or {}).get("phase") == "Running":
            timeline.mark("listener_pod_running", name_of(event))

    await asyncio.gather(
        one(
            EPHEMERAL_RUNNER_SET,
            namespaces["runners"],
            lambda e: timeline.mark("ers_created", name_of(e)),
        ),
        one(
            AUTOSCALING_LISTENER,
            namespaces["controller"],
            lambda e: timeline.mark("al_created", name_of(e)),
        ),
        one(POD, namespaces["controller"], on_pod),
    )


def process_started(timeline: Timeline, records: dict[str, Any]) -> None:
    """The pod runner's records: when each listener process was spawned."""
    for record in records.values():
        if record.kind == "listener" and record.started_at:
            timeline.mark("process_started", record.name, record.started_at)


def per_listener_lags(timeline: Timeline) -> dict[str, dict[str, float]]:
    """Per listener (pod name = AL name): seconds of each hop, p50 and max over listeners."""
    al = timeline.stages.get("al_created", {})
    pod = timeline.stages.get("listener_pod_created", {})
    proc = timeline.stages.get("process_started", {})
    hops = {
        "al_to_pod": [pod[n] - al[n] for n in pod if n in al],
        "pod_to_process": [proc[n] - pod[n] for n in proc if n in pod],
    }
    out = {}
    for hop, values in hops.items():
        values.sort()
        if values:
            out[hop] = {"p50": round(_quantile(values, 0.5), 2), "max": round(values[-1], 2)}
    return out
