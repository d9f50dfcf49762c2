"""Benchmark: NATS messages a listener publishes when idle, and per job in a trickle (ADR 0061).

Not a test. One nats-server, the Actions simulator and the Kubernetes API emulator (in this
process), one ``python -m arcflow.listener`` serving one ARS with ``--n`` variants (one scale
set each). After every session is open and ``--settle`` seconds more, it counts every message
published on ``arc.scale.>`` (``scale.decision``) and ``arc.jobs.>`` (``jobs.batch``) during
``--window`` seconds of idle: messages per scale set per minute. Then a trickle: ``--jobs``
jobs, one every ``--interval`` seconds round-robin over the variants, each run by a simulated
runner (a JIT config from the simulator, ``--job-seconds`` long): messages per job, counted
from the first enqueue until every job completed, the listener acknowledged every message of
the simulator's queues, and ``--tail`` seconds passed.

``--pythonpath`` puts other source trees first, to measure an older version (for example
``git archive main`` unpacked somewhere: its ``libs/*/src`` and ``services/*/src``).

    .venv/bin/python benchmarks/listener_idle.py --label after --out /tmp/idle-after.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import nats
from _report import loadavg, write_runs
from listener_scale_sets import Bench, World, wait_for

from arcflow.common.actions import ActionsClient, PatCredentials, RetryPolicy


@dataclass
class IdleRun:
    label: str
    scale_sets: int
    poll_timeout_seconds: float
    startup_seconds: float
    idle_window_seconds: float
    idle_decisions: int
    idle_batches: int
    idle_messages_per_set_per_minute: float
    trickle_jobs: int
    trickle_seconds: float
    trickle_decisions: int
    trickle_batches: int
    trickle_messages_per_job: float
    exit_code: int


class Counting:
    """Counts messages per stream subject prefix while ``on`` is set."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def on_msg(self, msg: nats.aio.msg.Msg) -> None:
        self.counts[msg.subject.split(".")[1]] += 1

    def take(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts


class IdleBench(Bench):
    async def run(self, w: World) -> IdleRun:
        args = self.args
        ars = "fleet"
        token = w.sim.add_pat()
        ids = await self.prepare(w.sim, w.kube, ars, args.n, token)
        (config,) = self.configs(w.sim, token, ars, ids, "multi")
        env = self.listener_env(ars, config, w.nats_url, w.kubeconfig)
        counting = Counting()
        nc = await nats.connect(w.nats_url)
        await nc.subscribe("arc.scale.>", cb=counting.on_msg)
        await nc.subscribe("arc.jobs.>", cb=counting.on_msg)
        log = open(self.tmp / f"{ars}.log", "wb")  # noqa: SIM115, ASYNC230 - closed below
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "arcflow.listener", env=env, stdout=log, stderr=log
        )
        wanted = set(ids.values())

        async def sessions_open() -> bool:
            live = {s["id"] for s in w.sim.snapshot()["scaleSets"] if s["session"] is not None}
            return wanted <= live

        try:
            startup = await wait_for(sessions_open, args.startup_timeout, "all sessions")
            await asyncio.sleep(args.settle)
            counting.take()
            await asyncio.sleep(args.window)
            idle = counting.take()
            seconds = await self.trickle(w, token, ids) if args.jobs else 0.0
            trickle = counting.take()
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 60)
            log.close()
            await nc.close()
        idle_total = idle["scale"] + idle["jobs"]
        return IdleRun(
            label=args.label,
            scale_sets=args.n,
            poll_timeout_seconds=args.poll_timeout,
            startup_seconds=round(startup, 1),
            idle_window_seconds=args.window,
            idle_decisions=idle["scale"],
            idle_batches=idle["jobs"],
            idle_messages_per_set_per_minute=round(idle_total / args.n / (args.window / 60), 3),
            trickle_jobs=args.jobs,
            trickle_seconds=round(seconds, 1),
            trickle_decisions=trickle["scale"],
            trickle_batches=trickle["jobs"],
            trickle_messages_per_job=round(
                (trickle["scale"] + trickle["jobs"]) / max(args.jobs, 1), 2
            ),
            exit_code=code,
        )

    async def trickle(self, w: World, token: str, ids: dict[str, int]) -> float:
        """``--jobs`` jobs, one every ``--interval`` s over the variants, each run by a
        simulated runner, until all completed plus ``--tail``; returns the seconds."""
        args = self.args
        started = time.monotonic()
        async with ActionsClient(
            w.sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
        ) as client:

            async def one(index: int, ers: str) -> None:
                w.sim.enqueue_job([ers], duration=None)
                jit = await client.generate_jit_runner_config(ids[ers], f"runner-{index}")
                await w.sim.run_runner(
                    jit.encoded_jit_config.get_secret_value(),
                    job_duration=args.job_seconds,
                    job_wait=120.0,
                )

            tasks = []
            for index, ers in zip(range(args.jobs), itertools.cycle(ids), strict=False):
                tasks.append(asyncio.ensure_future(one(index, ers)))
                await asyncio.sleep(args.interval)
            await asyncio.gather(*tasks)

        def drained() -> bool:
            queues = [s["queue"] for s in w.sim.snapshot()["scaleSets"]]
            return all(not q["messageIds"] and not q["pendingEvents"] for q in queues)

        async def listener_caught_up() -> bool:  # every job message polled and acknowledged
            return drained()

        await wait_for(listener_caught_up, 300, "every job message acknowledged")
        await asyncio.sleep(args.tail)
        return time.monotonic() - started


async def run(args: argparse.Namespace) -> IdleRun:
    bench = IdleBench(args)
    async with bench.world() as w:
        return await bench.run(w)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=88, help="variants (scale sets) of the ARS")
    parser.add_argument("--label", default="", help="what this run measures (before/after)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before counting")
    parser.add_argument("--window", type=float, default=120.0, help="idle window (s)")
    parser.add_argument("--jobs", type=int, default=88, help="trickle jobs (0: no trickle)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between jobs")
    parser.add_argument("--job-seconds", type=float, default=1.0, help="each job's duration")
    parser.add_argument("--tail", type=float, default=5.0, help="after the last job (s)")
    parser.add_argument("--poll-timeout", type=float, default=5.0, help="simulator long poll")
    parser.add_argument("--startup-timeout", type=float, default=600.0)
    parser.add_argument("--pythonpath", default="", help="source trees to put first")
    parser.add_argument("--out", default="benchmarks/results/listener_idle.json")
    args = parser.parse_args(argv)
    args.pythonpath = [p for p in str(args.pythonpath).split(",") if p]
    if args.n < 1:
        parser.error("--n must be positive")
    return args


def main() -> None:
    args = parse_args()
    started = time.time()
    before = loadavg()
    result = asyncio.run(run(args))
    print(
        f"{result.label or 'run'}: {result.scale_sets} sets, idle "
        f"{result.idle_messages_per_set_per_minute} messages/set/min "
        f"({result.idle_decisions} decisions, {result.idle_batches} batches in "
        f"{result.idle_window_seconds:.0f} s); trickle {result.trickle_jobs} jobs: "
        f"{result.trickle_messages_per_job} messages/job"
    )
    write_runs(
        Path(args.out),
        "listener_idle",
        label=args.label,
        started=started,
        load_before=before,
        settings={
            "scale_sets": args.n,
            "poll_timeout_seconds": args.poll_timeout,
            "settle_seconds": args.settle,
            "idle_window_seconds": args.window,
            "jobs": args.jobs,
            "interval_seconds": args.interval,
            "job_seconds": args.job_seconds,
            "pythonpath": args.pythonpath,
        },
        runs=[result],
    )


if __name__ == "__main__":
    main()
