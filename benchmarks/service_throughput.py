"""Benchmark: events/s through each service's JetStream consumer path (fetch, parse, settle).

Not a test. Starts one nats-server, publishes ``--events`` events into a stream and measures how
long the consumer of each service takes to settle (ack) all of them, with the service's real
subscription (its ``ServiceSpec``, run by ``subscriptions_only``) and a stub in place of the
business logic. The clock runs from the first handled event until the consumer has nothing
pending and nothing waiting for an ack (connect and bind excluded, and a full garbage
collection done before it); over the same span it also reports the CPU time the process spent
per event, which other processes competing for the cores disturb far less:

* ``registrar``: ``k8s.object.changed`` events on ``registrar-ars``; its real handler
  (event -> ARS -> the work queue's key, ADR 0072), the work queue replaced by a counter
  (``--handler-ms`` does not apply: the handler only enqueues);
* ``reconciler``: ``scaleset.assigned`` events on ``reconciler-scalesets``; the handler
  (event -> work-queue keys) is the real one, the work queue is not started (reconciles are
  not measured), then it awaits ``--handler-ms``.

The script uses only what the service skeleton offered before and after ADR 0070, so the same
file measures both: run it with the interpreter of each checkout, alternating, so both see the
same load (docs/benchmarks/service-skeleton.md)::

    .venv/bin/python benchmarks/service_throughput.py --label after --runs 1
    /path/to/main/.venv/bin/python benchmarks/service_throughput.py --label before --runs 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nats
import nats.errors
from nats.js import JetStreamContext

from arcflow.common import subjects
from arcflow.common.events import EventBase, EventKeys, K8sObjectChanged, ScaleSetAssigned
from arcflow.common.nats import ensure_jetstream, publish_event
from arcflow.common.nats.jetstream import (
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    ConsumerSpec,
)
from arcflow.common.service import ServiceSpec
from arcflow.common.service.inprocess import subscriptions_only
from arcflow.devstack.nats_server import NatsServer

NAMESPACE = "bench"

Runner = Callable[[str, int, float, Callable[[], None]], Awaitable[Callable[[], Awaitable[None]]]]
Publisher = Callable[[JetStreamContext, int], Awaitable[None]]


def _event(i: int, run: str) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="bench",
        api_version="actions.github.com/v1alpha1",
        kind="AutoscalingRunnerSet",
        resource="autoscalingrunnersets",
        namespace=NAMESPACE,
        name=f"ars-{i}",
        uid=f"uid-{run}-{i}",  # a fresh uid per run: the stream de-duplicates by uid+version
        change="MODIFIED",
        resource_version=str(i + 1),
    )


async def _publish_all(js: JetStreamContext, items: list[tuple[str, EventBase]]) -> None:
    sem = asyncio.Semaphore(64)

    async def one(subject: str, event: EventBase) -> None:
        async with sem:
            await publish_event(js, subject, event)

    await asyncio.gather(*(one(subject, event) for subject, event in items))


async def _publish_k8s(js: JetStreamContext, n: int) -> None:
    run = os.urandom(4).hex()
    events = [_event(i, run) for i in range(n)]
    await _publish_all(
        js, [(subjects.k8s_subject(e.resource, e.namespace, e.name), e) for e in events]
    )


async def _publish_scalesets(js: JetStreamContext, n: int) -> None:
    items: list[tuple[str, EventBase]] = []
    for i in range(n):
        ars, variant = f"ars-{i // 10}", f"v{i % 10}"
        event = ScaleSetAssigned(
            source="bench",
            keys=EventKeys(namespace=NAMESPACE, ars=ars, variant=variant),
            variant=variant,
            scale_set_id=i + 1,
            scale_set_name=f"{ars}-{variant}",
            runner_group_id=1,
            runner_group_name="default",
        )
        items.append((subjects.scalesets_subject(NAMESPACE, ars, variant), event))
    await _publish_all(js, items)


async def _pending(js: JetStreamContext, spec: ConsumerSpec) -> tuple[int, int]:
    info = await js.consumer_info(spec.stream, spec.durable)
    return int(info.num_pending or 0), int(info.num_ack_pending or 0)


def _stub_registrar_state(handler_s: float, on_event: Callable[[], None]) -> Any:
    """The registrar's state with a work queue that only counts: its handler only enqueues
    the ARS key since ADR 0072 (the pass runs on the queue), so ``handler_s`` no longer
    applies to it."""

    from arcflow.common.reconcile.manager import Manager
    from arcflow.registrar.controller import DECLARED

    def enqueue(namespace: str, name: str, *, trigger: str, seen_version: str = "") -> None:
        on_event()

    # The declared routing (ADR 0095) without a queue that runs: the handler asks it for keys.
    return SimpleNamespace(enqueue=enqueue, manager=Manager(DECLARED, lambda _m: None))


def _reconciler_state() -> Any:
    """The reconciler's real event -> keys handler with a work queue that is not started."""
    from arcflow.common.reconcile.manager import Manager
    from arcflow.reconciler.controllers.declared import DECLARED
    from arcflow.reconciler.settings import ReconcilerSettings
    from arcflow.reconciler.state import ReconcilerState

    real = ReconcilerState.__new__(ReconcilerState)
    real.settings = ReconcilerSettings()
    real._trace_parents = {}
    real.manager = Manager(DECLARED, lambda _manager: None)  # no cache; the queue never starts
    real.queue = real.manager.queue
    return real


async def _run_spec(url: str, spec: ServiceSpec[Any], state: Any) -> Callable[[], Awaitable[None]]:
    """The spec's own subscriptions on the runtime, with ``state`` instead of its build."""
    runtime = await subscriptions_only(url, spec, state)
    return runtime.stop


async def _skeleton_registrar(
    url: str, n: int, handler_s: float, on_event: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    from arcflow.registrar.service import SERVICE

    return await _run_spec(url, SERVICE, _stub_registrar_state(handler_s, on_event))


async def _skeleton_reconciler(
    url: str, n: int, handler_s: float, on_event: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    from arcflow.reconciler.service import SERVICE

    real = _reconciler_state()

    class Counted:
        async def on_event(self, event: Any, delivery: Any) -> None:
            await real.on_event(event, delivery)
            await asyncio.sleep(handler_s)
            on_event()

    return await _run_spec(url, SERVICE, Counted())


CASES: dict[str, tuple[ConsumerSpec, Runner, Publisher]] = {
    "registrar": (CONSUMER_REGISTRAR_ARS, _skeleton_registrar, _publish_k8s),
    "reconciler": (CONSUMER_RECONCILER_SCALESETS, _skeleton_reconciler, _publish_scalesets),
}


async def run_case(server: NatsServer, service: str, n: int, handler_ms: float) -> Rate:
    spec, runner, publish = CASES[service]
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    await ensure_jetstream(js)
    await js.purge_stream(spec.stream)
    await js.delete_consumer(spec.stream, spec.durable)
    await ensure_jetstream(js)
    await publish(js, n)
    # A full collection now, in both implementations: the first one after the imports (tens of
    # ms, more objects in the process that imports more) would otherwise land in the measured
    # half second or not, at random. It is a start-up cost, not a cost per event.
    gc.collect()
    done = asyncio.Event()
    handled = 0
    started = cpu_started = 0.0

    def on_event() -> None:
        nonlocal handled, started, cpu_started
        if handled == 0:
            started = time.perf_counter()  # clock starts at the first handled event
            cpu_started = time.process_time()
        handled += 1
        if handled >= n:
            done.set()

    stop = await runner(server.url, n, handler_ms / 1000, on_event)
    await asyncio.wait_for(done.wait(), timeout=120)
    # settled = nothing pending and nothing waiting for an ack
    while await _pending(js, spec) != (0, 0):  # noqa: ASYNC110 - polling the server
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await stop()
    await nc.drain()
    return Rate(n / elapsed, cpu / n * 1e6)


@dataclass(frozen=True)
class Rate:
    events_per_s: float
    #: CPU time of this process per event (all threads), in microseconds: what the consume path
    #: costs, far less sensitive than events/s to other processes competing for the cores.
    cpu_us_per_event: float


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="run", help="names the results (before/after)")
    parser.add_argument("--services", default="registrar,reconciler")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--handler-ms", default="0,5", help="comma-separated handler latencies")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with NatsServer() as server:
        for service in args.services.split(","):
            for handler_ms in (float(x) for x in args.handler_ms.split(",")):
                rates = [
                    asyncio.run(run_case(server, service, args.events, handler_ms))
                    for _ in range(args.runs)
                ]
                row = {
                    "label": args.label,
                    "service": service,
                    "handler_ms": handler_ms,
                    "events": args.events,
                    "events_per_s": [round(r.events_per_s) for r in rates],
                    "median": round(statistics.median(r.events_per_s for r in rates)),
                    "cpu_us_per_event": [round(r.cpu_us_per_event) for r in rates],
                    "cpu_median": round(statistics.median(r.cpu_us_per_event for r in rates)),
                }
                results.append(row)
                print(
                    f"{args.label:9} {service:10} handler {handler_ms:4.0f} ms: "
                    f"median {row['median']:6} ev/s  runs {row['events_per_s']}  "
                    f"CPU median {row['cpu_median']} us/event  runs {row['cpu_us_per_event']}",
                    flush=True,
                )
    out = args.out or Path("benchmarks/results") / f"service-throughput-{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
