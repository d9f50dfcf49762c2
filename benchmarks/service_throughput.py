"""Benchmark: events/s through each service's JetStream consumer path (fetch, parse, settle).

Not a test. Starts one nats-server, publishes ``--events`` ``k8s.object.changed`` events into
``ARC_K8S`` and measures how long the consumer of each service takes to settle (ack) all of
them, with the service's real consume path and a stub in place of the business logic. The
clock runs from the first handled event until the consumer has nothing pending and nothing
waiting for an ack (connect and bind excluded, and a full garbage collection done before it);
over the same span it also reports the CPU time the process spent per event, which other
processes competing for the cores disturb far less:

* ``registrar``: the ``registrar-ars`` consumer; its real handler (event -> ARS -> converge),
  with the converge replaced by a stub that awaits ``--handler-ms`` (simulated I/O: GitHub and
  Kubernetes calls);
* (``reconciler``: the ``reconciler-k8s`` consumer, measured in
  ``docs/benchmarks/service-skeleton.md``; gone since ADR 0069, the reconciler's Kubernetes
  trigger is its own watch.)

``--impl loops`` measures the hand-written fetch loops (before issue 13), ``--impl skeleton``
the FastStream subscribers of ``arcflow.common.service`` (after). Three runs per case.

    .venv/bin/python benchmarks/service_throughput.py --impl loops --events 2000
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
from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats import (
    STREAM_K8S,
    EventConsumer,
    ensure_jetstream,
    publish_event,
)
from arcflow.common.nats.jetstream import (
    CONSUMER_REGISTRAR_ARS,
    ConsumerSpec,
)
from arcflow.common.service import ServiceSpec
from arcflow.common.service.inprocess import subscriptions_only
from arcflow.devstack.nats_server import NatsServer

NAMESPACE = "bench"

Runner = Callable[[str, int, float, Callable[[], None]], Awaitable[Callable[[], Awaitable[None]]]]


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


async def _publish(js: JetStreamContext, n: int) -> None:
    sem = asyncio.Semaphore(64)
    run = os.urandom(4).hex()

    async def one(i: int) -> None:
        async with sem:
            event = _event(i, run)
            await publish_event(
                js,
                subjects.k8s_subject(event.resource, event.namespace, event.name),
                event,
            )

    await asyncio.gather(*(one(i) for i in range(n)))


async def _pending(js: JetStreamContext, spec: ConsumerSpec) -> tuple[int, int]:
    info = await js.consumer_info(spec.stream, spec.durable)
    return int(info.num_pending or 0), int(info.num_ack_pending or 0)


# --- before: the hand-written loops ------------------------------------------------------------
# The fetch loops the registrar (``ChangeConsumer._run``: fetch a batch, settle it with
# ``gather``) and the reconciler (its app's ``_consume``: fetch a batch, settle one by one)
# ran before issue 13 (commit 661bb54), kept here so before and after run under the same load.


async def _loop(
    url: str, spec: ConsumerSpec, handle: Any, *, batch: int, gather: bool
) -> Callable[[], Awaitable[None]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    settler = EventConsumer(
        spec, handle, service="bench", event_types=(K8sObjectChanged,), dead_letter_target=js
    )
    subscription = await js.pull_subscribe_bind(durable=spec.durable, stream=spec.stream)

    async def run() -> None:
        while True:
            try:
                messages = await subscription.fetch(batch, timeout=1.0)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            if gather:
                await asyncio.gather(*(settler.process(m) for m in messages))
            else:
                for message in messages:
                    await settler.process(message)

    task = asyncio.create_task(run())

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nc.drain()

    return stop


async def _loops_registrar(
    url: str, n: int, handler_s: float, on_event: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    from arcflow.registrar.k8s_changes import on_k8s_change

    # the same handler the skeleton runs (event -> ARS -> converge), as ChangeConsumer._handle did
    state = _stub_registrar_state(handler_s, on_event)

    async def handle(event: Any, delivery: Any) -> None:
        await on_k8s_change(state, event, delivery)

    return await _loop(url, CONSUMER_REGISTRAR_ARS, handle, batch=16, gather=True)


def _stub_registrar_state(handler_s: float, on_event: Callable[[], None]) -> Any:
    """The registrar's state with a work queue that only counts: its handler only enqueues
    the ARS key since ADR 0072 (the pass runs on the queue), so ``handler_s`` no longer
    applies to it."""

    def enqueue(namespace: str, name: str, *, trigger: str, seen_version: str = "") -> None:
        on_event()

    return SimpleNamespace(enqueue=enqueue)


# --- after: the service skeleton (FastStream subscribers declared by each spec) ------------


async def _run_spec(url: str, spec: ServiceSpec[Any], state: Any) -> Callable[[], Awaitable[None]]:
    """The spec's own subscriptions on the runtime, with ``state`` instead of its build."""
    runtime = await subscriptions_only(url, spec, state)
    return runtime.stop


async def _skeleton_registrar(
    url: str, n: int, handler_s: float, on_event: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    from arcflow.registrar.service import SERVICE

    return await _run_spec(url, SERVICE, _stub_registrar_state(handler_s, on_event))


IMPLS: dict[str, dict[str, tuple[ConsumerSpec, Runner]]] = {
    "loops": {
        "registrar": (CONSUMER_REGISTRAR_ARS, _loops_registrar),
    },
    "skeleton": {
        "registrar": (CONSUMER_REGISTRAR_ARS, _skeleton_registrar),
    },
}


async def run_case(server: NatsServer, impl: str, service: str, n: int, handler_ms: float) -> Rate:
    spec, runner = IMPLS[impl][service]
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    await ensure_jetstream(js)
    await js.purge_stream(STREAM_K8S.name)
    await js.delete_consumer(spec.stream, spec.durable)
    await ensure_jetstream(js)
    await _publish(js, n)
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
    parser.add_argument("--impl", choices=sorted(IMPLS), required=True)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--handler-ms", default="0,5", help="comma-separated handler latencies")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with NatsServer() as server:
        for service in IMPLS[args.impl]:
            for handler_ms in (float(x) for x in args.handler_ms.split(",")):
                rates = [
                    asyncio.run(run_case(server, args.impl, service, args.events, handler_ms))
                    for _ in range(args.runs)
                ]
                row = {
                    "impl": args.impl,
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
                    f"{args.impl:9} {service:10} handler {handler_ms:4.0f} ms: "
                    f"median {row['median']:6} ev/s  runs {row['events_per_s']}  "
                    f"CPU median {row['cpu_median']} us/event  runs {row['cpu_us_per_event']}",
                    flush=True,
                )
    out = args.out or Path("benchmarks/results") / f"service-throughput-{args.impl}.json"
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
