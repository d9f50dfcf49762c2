"""Benchmark: CPU time of one FastStream call of a batch pull subscriber (ADR 0055).

Not a test. Builds the subscriber the way ``arcflow.common.service.subscribers`` does (durable
pull, ``PullSub(batch=True)``, manual acks, our raw decoder) with a handler that does nothing,
with FastStream's own parser and subscriber class or with ours (the lean parser, and the class
that builds the log context once), with and without FastStream's dependency injection
(``apply_types``); starts it on a real nats-server and calls FastStream's ``consume`` with the
same 16 nats-py messages many times: what FastStream itself costs per fetch (middlewares,
context, parser, dependency injection), nothing of ours and nothing of the network.

    .venv/bin/python benchmarks/faststream_call.py --calls 3000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, PullSub
from nats.aio.msg import Msg

from arcflow.common.nats import ensure_jetstream
from arcflow.common.nats.jetstream import CONSUMER_REGISTRAR_ARS as SPEC
from arcflow.common.service.pull import make_steady
from arcflow.common.service.subscribers import _fetch_as_message, _raw_messages
from arcflow.devstack.nats_server import NatsServer

BATCH = 16


async def cpu_per_call(url: str, *, ours: bool, apply_types: bool, calls: int) -> float:
    """Microseconds of CPU per ``consume`` call of one subscriber."""
    broker = NatsBroker(url, logger=None, apply_types=apply_types)
    handled = 0

    async def on_fetch(messages: Any) -> None:
        nonlocal handled
        handled += len(messages)

    options: dict[str, Any] = {"parser": _fetch_as_message} if ours else {}
    subscriber = broker.subscriber(
        SPEC.filter_subject,
        stream=JStream(SPEC.stream, declare=False),
        durable=SPEC.durable,
        config=SPEC.to_config(),
        pull_sub=PullSub(batch_size=BATCH, timeout=1.0, batch=True),
        ack_policy=AckPolicy.MANUAL,
        decoder=_raw_messages,
        **options,
    )
    if ours:
        make_steady(subscriber)
    subscriber(on_fetch)
    nc = await broker.connect()
    await ensure_jetstream(nc.jetstream())
    await broker.start()
    try:
        messages = [
            Msg(
                nc,
                subject=f"arc.k8s.pods.ns.p{i}",
                reply=f"$JS.ACK.ARC_K8S.c.1.{i}.{i}.0.0",
                data=b"{}",
            )
            for i in range(BATCH)
        ]
        for _ in range(200):  # warm-up
            await subscriber.consume(messages)
        started = time.process_time()
        for _ in range(calls):
            await subscriber.consume(messages)
        cpu = time.process_time() - started
        if handled != (calls + 200) * BATCH:
            raise AssertionError("the handler did not see every call")
        return cpu / calls * 1e6
    finally:
        await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with NatsServer() as server:
        for ours in (False, True):
            for apply_types in (True, False):
                runs = [
                    asyncio.run(
                        cpu_per_call(
                            server.url,
                            ours=ours,
                            apply_types=apply_types,
                            calls=args.calls,
                        )
                    )
                    for _ in range(args.runs)
                ]
                print(
                    f"parser and class: {'ours      ' if ours else 'FastStream'}  apply_types "
                    f"{apply_types!s:5}  median {statistics.median(runs):5.1f} us/call  "
                    f"runs {[round(r, 1) for r in runs]}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
