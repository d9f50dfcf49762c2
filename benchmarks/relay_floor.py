"""The watcher's floor per change (issue #31, goal 3): what the least Python code, with the
project's own libraries, spends to read one watch event and announce it acknowledged.

Not a test. The watcher relays every change of the kinds it watches: it reads a watch event,
keeps the object's metadata, and publishes a ``k8s.object.changed`` event to JetStream,
acknowledged before its resume point moves. This script measures that work alone, in one
process, on the changes of real runner chains:

1. **Record.** A fresh control plane with the pod runner (``_floor.py``'s stack) runs
   ``--chains`` runner chains (``_floor_client.py``: the chain's writes, the pod runner's
   binding and statuses, the deletes) while this process watches EphemeralRunners, Pods and
   Secrets (metadata only, as the watcher reads them) in the namespace. Each event is kept as
   the line the API server sent (JSON, re-encoded compactly).
2. **Measure**, against a real nats-server with arcflow's streams, in rounds that alternate
   the three ways (``--runs`` rounds, each over at least ``--changes`` changes, CPU seconds of
   this process and of nats-server):

   * ``decode``: ``json.loads`` of each line: the least a watch reader does;
   * ``publish``: nats-py's ``JetStreamContext.publish`` of each change's event (encoded
     beforehand, its own ``Nats-Msg-Id``), awaited one by one: the least an acknowledged
     announcement costs;
   * ``watcher``: the watcher's own code per change (``summarize``, ``change_for_watch_event``,
     ``build_event``, ``EventPublisher.publish`` with its producer span, and the published
     counter of ``WatcherMetrics``), after the same ``json.loads``.

``decode`` + ``publish`` is the floor; ``watcher`` against it is what the watcher's own code
adds. The watcher's CPU per change in a burst (whole process: HTTP reads, TLS, checkpoints)
is in docs/benchmarks/real-server.md beside these figures::

    .venv/bin/python benchmarks/relay_floor.py [--chains 100] [--changes 5000] [--runs 3]

Result: ``benchmarks/results/relay-floor[-LABEL].json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from _floor import floor_run, floor_stack
from _stack import loadavg, machine, proc_usage, write_result
from nats.js import JetStreamContext
from opentelemetry.sdk.metrics import MeterProvider

from arcflow.common.kube import EPHEMERAL_RUNNER, POD, SECRET, KubeClient
from arcflow.common.kube.resources import Resource
from arcflow.common.nats.jetstream import ensure_jetstream, stream_for_subject
from arcflow.common.telemetry.tracing import setup_tracing
from arcflow.devstack.nats_server import NatsServer
from arcflow.watcher.changes import (
    KindCache,
    build_event,
    change_for_watch_event,
    subject_for,
    summarize,
)
from arcflow.watcher.metrics import WatcherMetrics
from arcflow.watcher.outbox import EventPublisher

#: What the watcher watches in a runner namespace during the chains (Secrets as metadata).
RECORDED = ((EPHEMERAL_RUNNER, False), (POD, False), (SECRET, True))
Line = tuple[Resource, bytes]


async def _record(
    kube: KubeClient, resource: Resource, namespace: str, metadata_only: bool, out: list[Line]
) -> None:
    version = (await kube.list(resource, namespace=namespace)).resource_version
    while True:
        watch = kube.watch(
            resource, namespace=namespace, resource_version=version, metadata_only=metadata_only
        )
        try:
            async with watch as stream:
                async for event in stream:
                    version = event.resource_version or version
                    if event.type in ("ADDED", "MODIFIED", "DELETED"):
                        line = {"type": event.type, "object": event.object}
                        out.append((resource, json.dumps(line, separators=(",", ":")).encode()))
        except asyncio.CancelledError:
            raise
        except Exception:  # a watch that ends is opened again
            await asyncio.sleep(0.2)


async def record(chains: int) -> tuple[list[Line], dict[str, Any]]:
    """The watch lines of ``chains`` runner chains, in the order they arrived."""
    lines: list[Line] = []
    async with floor_stack() as stack:
        tasks = [
            asyncio.create_task(_record(stack.kube, r, stack.namespace, meta, lines))
            for r, meta in RECORDED
        ]
        try:
            await asyncio.sleep(1.0)  # the watches open (each from its list's version: none lost)
            floor = await floor_run(
                stack.kube,
                stack.pod_runner,
                stack.namespace,
                chains,
                kubeconfig=stack.parts.kubeconfig,
            )
            deadline = time.monotonic() + 60
            # every runner's objects gone: one DELETED per EphemeralRunner, Pod and Secret
            while time.monotonic() < deadline:
                deleted = Counter(
                    r.plural for r, raw in lines if raw.startswith(b'{"type":"DELETED"')
                )
                if all(deleted[r.plural] >= chains for r, _ in RECORDED):
                    break
                await asyncio.sleep(0.2)
            else:
                raise TimeoutError(f"not every runner's objects were seen deleted: {deleted}")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    by_kind = Counter(r.plural for r, _ in lines)
    sizes = {
        plural: round(statistics.mean(len(raw) for r, raw in lines if r.plural == plural))
        for plural in by_kind
    }
    info = {
        "chains": chains,
        "changes": len(lines),
        "changes_per_chain": round(len(lines) / chains, 2),
        "changes_by_kind": dict(by_kind),
        "mean_line_bytes_by_kind": sizes,
        "floor_seconds": floor.get("floor_seconds"),
    }
    return lines, info


def _unique(obj: dict[str, Any], tag: str) -> dict[str, Any]:
    """The object with a uid of this round's own, so JetStream stores every change (the
    same uid, version and change type twice is a duplicate it drops)."""
    obj["metadata"]["uid"] = f"{obj['metadata']['uid']}-{tag}"
    return obj


class Relay:
    """The three ways over one corpus; each returns the number of changes it handled."""

    def __init__(self, js: JetStreamContext, lines: list[Line], changes: int) -> None:
        self.js = js
        self.lines = lines
        self.repeat = max(1, -(-changes // len(lines)))
        self.metrics = WatcherMetrics(MeterProvider().get_meter("relay-floor"))
        self.publisher = EventPublisher(js, self.metrics)
        self.round = 0

    def _rounds(self) -> list[str]:
        self.round += 1
        return [f"{self.round}.{i}" for i in range(self.repeat)]

    async def decode(self) -> int:
        count = 0
        for _tag in self._rounds():
            for _resource, raw in self.lines:
                json.loads(raw)
                count += 1
        return count

    def _encoded_events(self) -> list[tuple[str, str, bytes]]:
        """Not timed: each change's subject, message id and event bytes, this round's uids."""
        out = []
        for tag in self._rounds():
            cache = KindCache.empty()
            for resource, raw in self.lines:
                line = json.loads(raw)
                obj = summarize(_unique(line["object"], tag))
                change = change_for_watch_event(cache.objects, line["type"], obj)
                if change is None:
                    continue
                cache.apply(change)
                event = build_event(resource, change)
                msg_id = f"{obj.uid}:{obj.resource_version}:{change.change}"
                out.append((subject_for(resource, obj), msg_id, event.model_dump_json().encode()))
        return out

    def publish(self) -> Callable[[], Awaitable[int]]:
        """The timed part: the events are built before it starts."""
        events = self._encoded_events()

        async def run() -> int:
            for subject, msg_id, payload in events:
                stream = stream_for_subject(subject).name
                await self.js.publish(
                    subject, payload, stream=stream, headers={"Nats-Msg-Id": msg_id}
                )
            return len(events)

        return run

    async def watcher(self) -> int:
        count = 0
        for tag in self._rounds():
            caches: dict[str, KindCache] = {}
            for resource, raw in self.lines:
                line = json.loads(raw)
                obj = summarize(_unique(line["object"], tag))
                cache = caches.setdefault(resource.plural, KindCache.empty())
                change = change_for_watch_event(cache.objects, line["type"], obj)
                if change is None:
                    continue
                seen_at = time.monotonic()
                await self.publisher.publish(
                    subject_for(resource, obj), build_event(resource, change)
                )
                cache.apply(change)
                self.metrics.published(resource.plural, change.change, time.monotonic() - seen_at)
                count += 1
        return count


async def _timed(run: Callable[[], Awaitable[int]], server_pid: int) -> dict[str, Any]:
    server_before = proc_usage(server_pid)[1]
    cpu_before, wall_before = time.process_time(), time.monotonic()
    count = await run()
    cpu = time.process_time() - cpu_before
    wall = time.monotonic() - wall_before
    server = proc_usage(server_pid)[1] - server_before
    return {
        "changes": count,
        "us_per_change": round(cpu / count * 1e6, 1),
        "nats_server_us_per_change": round(server / count * 1e6, 1),
        "wall_seconds": round(wall, 3),
        "loadavg_at_start": loadavg(),
    }


async def measure(lines: list[Line], changes: int, runs: int) -> list[dict[str, Any]]:
    setup_tracing("watcher")  # the watcher's producer spans, as in the service
    server = NatsServer().start()
    try:
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            await ensure_jetstream(js)
            relay = Relay(js, lines, changes)
            assert server.pid is not None
            rounds = []
            for index in range(runs):
                order = ("decode", "publish", "watcher")
                if index % 2:
                    order = order[::-1]
                for way in order:
                    run = relay.publish() if way == "publish" else getattr(relay, way)
                    result = await _timed(run, server.pid)
                    result.update(way=way, run=index + 1)
                    print(json.dumps(result), flush=True)
                    rounds.append(result)
            return rounds
        finally:
            await nc.close()
    finally:
        server.stop()


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for way in ("decode", "publish", "watcher"):
        values = [r["us_per_change"] for r in rounds if r["way"] == way]
        server = [r["nats_server_us_per_change"] for r in rounds if r["way"] == way]
        out[way] = {
            "us_per_change_median": round(statistics.median(values), 1),
            "us_per_change_spread": [min(values), max(values)],
            "nats_server_us_per_change_median": round(statistics.median(server), 1),
        }
    floor = out["decode"]["us_per_change_median"] + out["publish"]["us_per_change_median"]
    out["floor_us_per_change"] = round(floor, 1)
    out["watcher_over_floor"] = round(out["watcher"]["us_per_change_median"] / floor, 2)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=100, help="runner chains recorded")
    parser.add_argument("--changes", type=int, default=5000, help="changes per way and run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    load_at_start = loadavg()
    lines, recorded = await record(args.chains)
    print(json.dumps(recorded), flush=True)
    rounds = await measure(lines, args.changes, args.runs)
    payload = {
        "benchmark": "relay_floor",
        "machine": machine(),
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": loadavg(),
        "args": vars(args),
        "recorded": recorded,
        "runs": rounds,
        "summary": summary(rounds),
    }
    print(json.dumps(payload["summary"]), flush=True)
    name = "relay-floor" + (f"-{args.label}" if args.label else "")
    print(f"wrote {write_result(name, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
