"""Benchmark: the footprint of one listener process (issue 14 item 1).

Not a test. Starts one nats-server, the Actions simulator and the Kubernetes emulator (in this
process), then for each N (scale sets in one ``python -m arcflow.listener``; N=1 is the
single-set, upstream-shaped config) and each of ``--runs`` runs:

* **CPU to first poll**: utime+stime of the process (from /proc, sampled every 10 ms) when the
  simulator receives the first message long poll of the process, and when every scale set
  has polled; wall seconds for both;
* **idle RSS**: VmRSS after every session is open and ``--settle`` seconds passed, and VmHWM
  (the peak);
* with ``--trickle JOBS``, then a trickle: JOBS jobs, one every ``--interval`` s round-robin
  over the N scale sets, each run by a simulated runner for ``--job-seconds`` (so the listener
  sees every message a job makes: available, assigned, started, completed), until every job
  message is acknowledged plus ``--tail`` s: the **largest VmRSS** sampled every 50 ms during
  the trickle, VmHWM then (the peak over the whole life of the process, start included) and
  the RSS after it. The listener's own target is measured
  with ``--n 3 --trickle 20``.

Listener processes use a bytecode cache (``PYTHONPYCACHEPREFIX``) filled by a discarded
warm-up run: the image compiles bytecode at build, so start-up must not include compiling.
``--listener-python`` runs the listeners with another interpreter: the image's virtualenv holds
only the listener's runtime packages (41 distributions instead of this workspace's 82, which
changes what importlib.metadata scans and caches), made with
``UV_PROJECT_ENVIRONMENT=/tmp/listener-venv uv sync --frozen --no-dev --no-editable --package
arcflow-listener``. ``--pythonpath DIR[,DIR]`` puts other source trees first on the
listener's PYTHONPATH, to measure an older version (``git archive <commit>
libs/common/src services/listener/src``).

    .venv/bin/python benchmarks/listener_footprint.py --n 1,10,100 --runs 3
    .venv/bin/python benchmarks/listener_footprint.py --n 3 --runs 3 --trickle 20
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from listener_scale_sets import Bench, proc_usage

from arcflow.common.actions import ActionsClient, PatCredentials, RetryPolicy
from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator

POLLS = "*/runnerscalesets/*/messages"


@dataclass
class Run:
    n: int
    run: int
    first_poll_cpu_s: float
    first_poll_wall_s: float
    all_polled_cpu_s: float
    all_polled_wall_s: float
    idle_rss_mib: float
    peak_rss_mib: float
    trickle_jobs: int = 0
    trickle_seconds: float = 0.0
    trickle_peak_rss_mib: float = 0.0
    trickle_max_rss_mib: float = 0.0
    after_trickle_rss_mib: float = 0.0


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def sample_rss(pid: int, into: list[float], every: float = 0.05) -> None:
    """VmRSS of ``pid`` every ``every`` s into ``into`` until cancelled."""
    while True:
        into.append(proc_usage(pid)[0])
        await asyncio.sleep(every)


class Footprint(Bench):
    async def one(
        self,
        n: int,
        run: int,
        sim: ActionsSimulator,
        kube: KubeClient,
        nats_url: str,
        kubeconfig: Path,
    ) -> Run:
        ars = f"fp{n}r{run}"
        token = sim.add_pat()
        ids = await self.prepare(sim, kube, ars, n, token)
        (config,) = self.configs(sim, token, ars, ids, "multi" if n > 1 else "single")
        env = self.listener_env(ars, config, nats_url, kubeconfig)
        wanted = {f"/runnerscalesets/{sid}/messages" for sid in ids.values()}
        before = len(sim.requests)
        with open(self.tmp / f"{ars}.log", "wb") as log:  # noqa: ASYNC230 - a log file, once
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                self.args.listener_python or sys.executable,
                "-m",
                "arcflow.listener",
                env=env,
                stdout=log,
                stderr=log,
            )
            first: tuple[float, float] | None = None
            try:
                while True:
                    _rss, cpu = proc_usage(proc.pid)
                    now = time.monotonic() - started
                    seen = {
                        r.path[r.path.index("/runnerscalesets/") :]
                        for r in list(sim.requests)[before:]
                        if r.method == "GET" and r.path.endswith("/messages")
                    }
                    if seen and first is None:
                        first = (cpu, now)
                    if wanted <= seen:
                        break
                    if now > self.args.startup_timeout:
                        raise TimeoutError(f"N={n}: not every scale set polled")
                    if proc.returncode is not None:
                        raise RuntimeError(f"listener exited {proc.returncode}; see {log.name}")
                    await asyncio.sleep(0.01)
                assert first is not None
                await asyncio.sleep(self.args.settle)
                idle_rss, _cpu = proc_usage(proc.pid)
                peak = peak_rss_mib(proc.pid)
                trickle_s = trickle_peak = trickle_max = after_rss = 0.0
                if self.args.trickle:
                    samples: list[float] = []
                    sampler = asyncio.ensure_future(sample_rss(proc.pid, samples))
                    try:
                        trickle_s = await self.trickle(sim, token, ids)
                    finally:
                        sampler.cancel()
                    trickle_peak = peak_rss_mib(proc.pid)
                    trickle_max = max(samples, default=0.0)
                    after_rss, _cpu = proc_usage(proc.pid)
            finally:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 30)  # shutdown is not measured
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        return Run(
            n=n,
            run=run,
            first_poll_cpu_s=round(first[0], 2),
            first_poll_wall_s=round(first[1], 2),
            all_polled_cpu_s=round(cpu, 2),
            all_polled_wall_s=round(now, 2),
            idle_rss_mib=round(idle_rss, 1),
            peak_rss_mib=round(peak, 1),
            trickle_jobs=self.args.trickle,
            trickle_seconds=round(trickle_s, 1),
            trickle_peak_rss_mib=round(trickle_peak, 1),
            trickle_max_rss_mib=round(trickle_max, 1),
            after_trickle_rss_mib=round(after_rss, 1),
        )

    async def trickle(self, sim: ActionsSimulator, token: str, ids: dict[str, int]) -> float:
        """``--trickle`` jobs, one every ``--interval`` s round-robin over the scale sets,
        each run by a simulated runner, until every job message is acknowledged, plus
        ``--tail`` s; returns the seconds."""
        args = self.args
        started = time.monotonic()
        async with ActionsClient(
            sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
        ) as client:

            async def one(index: int, ers: str) -> None:
                sim.enqueue_job([ers], duration=None)
                jit = await client.generate_jit_runner_config(ids[ers], f"{ers}-r{index}")
                await sim.run_runner(
                    jit.encoded_jit_config.get_secret_value(),
                    job_duration=args.job_seconds,
                    job_wait=120.0,
                )

            tasks = []
            for index, ers in zip(range(args.trickle), itertools.cycle(ids), strict=False):
                tasks.append(asyncio.ensure_future(one(index, ers)))
                await asyncio.sleep(args.interval)
            await asyncio.gather(*tasks)
        mine = set(ids.values())

        def drained() -> bool:  # every job message of these sets polled and acknowledged
            return all(
                not s["queue"]["messageIds"] and not s["queue"]["pendingEvents"]
                for s in sim.snapshot()["scaleSets"]
                if s["id"] in mine
            )

        deadline = time.monotonic() + 300
        while not drained():
            if time.monotonic() > deadline:
                raise TimeoutError("trickle: not every job message was acknowledged in 300 s")
            await asyncio.sleep(0.2)
        await asyncio.sleep(args.tail)
        return time.monotonic() - started

    async def all_runs(self) -> list[Run]:
        runs: list[Run] = []
        async with self.world() as w:
            # Warm-up (discarded): fills the bytecode cache, as an image build does.
            await self.one(1, 0, w.sim, w.kube, w.nats_url, w.kubeconfig)
            for n in self.args.n:
                for run in range(1, self.args.runs + 1):
                    result = await self.one(n, run, w.sim, w.kube, w.nats_url, w.kubeconfig)
                    print(f"  {asdict(result)}", file=sys.stderr, flush=True)
                    runs.append(result)
        return runs


def summary(runs: list[Run]) -> str:
    fields = [
        ("first_poll_cpu_s", "CPU s to 1st poll"),
        ("all_polled_cpu_s", "CPU s all polled"),
        ("all_polled_wall_s", "wall s all polled"),
        ("idle_rss_mib", "idle RSS MiB"),
        ("peak_rss_mib", "peak RSS MiB"),
    ]
    if any(r.trickle_jobs for r in runs):
        fields += [
            ("trickle_max_rss_mib", "max RSS in trickle MiB"),
            ("trickle_peak_rss_mib", "VmHWM after trickle MiB"),
            ("after_trickle_rss_mib", "RSS after trickle MiB"),
        ]
    head = "|   N | " + " | ".join(label for _f, label in fields) + " |"
    lines = [head, "|" + "---:|" * (len(fields) + 1)]
    for n in sorted({r.n for r in runs}):
        mine = [r for r in runs if r.n == n]
        cells = []
        for name, _label in fields:
            values = [float(getattr(r, name)) for r in mine]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        lines.append(f"| {n:>3} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1,10,100", help="comma-separated scale set counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before the RSS sample")
    # The simulator records a request when it answers: short polls time the first one well.
    parser.add_argument("--poll-timeout", type=float, default=0.2, help="simulator long poll")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--pythonpath", default="", help="source trees to put first")
    parser.add_argument("--trickle", type=int, default=0, help="trickle jobs after idle (0: none)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between jobs")
    parser.add_argument("--job-seconds", type=float, default=1.0, help="each job's run time")
    parser.add_argument("--tail", type=float, default=3.0, help="seconds after the trickle")
    parser.add_argument(
        "--listener-python",
        default="",
        help="interpreter of the listener processes: the python of a virtualenv holding only "
        "the listener's runtime packages, as the image has (default: this interpreter, whose "
        "virtualenv also holds the dev tools)",
    )
    parser.add_argument(
        "--hostname",
        default="",
        help="reach the simulator and the API server by this name (e.g. localhost) instead "
        "of 127.0.0.1, so the listener resolves names in threads as a pod does",
    )
    parser.add_argument(
        "--no-errors-stream",
        action="store_true",
        help="do not declare ARC_ERRORS (the watcher's stream): every session.opened publish "
        "fails, an error path (the measurements before ADR 0074 ran this way)",
    )
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="no PYTHONPYCACHEPREFIX: listeners compile every module at start, as the dev "
        "stack's pod runner starts them on a machine with PYTHONDONTWRITEBYTECODE=1",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment of the listener processes (e.g. MALLOC_ARENA_MAX=2)",
    )
    parser.add_argument("--label", default="", help="a name for this result set")
    parser.add_argument("--out", default="benchmarks/results/listener_footprint.json")
    args = parser.parse_args(argv)
    args.n = [int(x) for x in str(args.n).split(",") if x.strip()]
    args.pythonpath = [p for p in str(args.pythonpath).split(",") if p]
    args.listener_env = dict(item.split("=", 1) for item in args.env)
    args.jobs = 5  # max_runners in the generated configs (Bench.configs)
    return args


def main() -> None:
    args = parse_args()
    started = time.time()
    with open("/proc/loadavg") as handle:
        load_before = handle.read().split()[:3]
    runs = asyncio.run(Footprint(args).all_runs())
    with open("/proc/loadavg") as handle:
        load_after = handle.read().split()[:3]
    print(summary(runs))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "benchmark": "listener_footprint",
        "label": args.label,
        "listener_python": args.listener_python or sys.executable,
        "started_at": started,
        "duration_seconds": round(time.time() - started, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "settings": {
            "bytecode_cache": not args.no_bytecode_cache,
            "hostname": args.hostname or "127.0.0.1",
            "errors_stream": not args.no_errors_stream,
            "listener_env": args.listener_env,
            "settle_seconds": args.settle,
            "poll_timeout_seconds": args.poll_timeout,
            "trickle_jobs": args.trickle,
            "interval_seconds": args.interval,
            "job_seconds": args.job_seconds,
            "tail_seconds": args.tail,
        },
        "runs": [asdict(r) for r in runs],
        "summary_markdown": summary(runs),
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
