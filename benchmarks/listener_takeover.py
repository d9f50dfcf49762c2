"""Benchmark: how soon every variant polls again after a listener SIGKILL (issue 14 item 2).

Not a test. Starts nats-server, the Actions simulator and the Kubernetes emulator (in this
process). Per run: one ``python -m arcflow.listener`` serving ``--variants`` scale sets is
started, every session opens, a burst of ``--jobs`` jobs per variant is enqueued, the process
is SIGKILLed ``--kill-after`` seconds later and started again at once (as a kubelet restarts a
container). Measured from the kill: seconds until the simulator has answered a message poll
of every scale set (answers come within ``--poll-timeout``), the 409 answers to session
creates, and seconds until every ERS shows the burst.

``--pythonpath`` puts other source trees first, to measure an older version.

    .venv/bin/python benchmarks/listener_takeover.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import loadavg, write_runs
from listener_scale_sets import NAMESPACE, Bench, scale_set_of

from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator


@dataclass
class Run:
    run: int
    variants: int
    all_polling_again_s: float
    session_conflicts: int
    all_scaled_s: float


class Takeover(Bench):
    async def one(
        self, run: int, sim: ActionsSimulator, kube: KubeClient, nats_url: str, kubeconfig: Path
    ) -> Run:
        ars = f"tk{run}"
        token = sim.add_pat()
        ids = await self.prepare(sim, kube, ars, self.args.variants, token)
        (config,) = self.configs(sim, token, ars, ids, "multi")
        env = self.listener_env(ars, config, nats_url, kubeconfig)
        wanted = set(ids.values())

        def sessions() -> set[int]:
            return {s["id"] for s in sim.snapshot()["scaleSets"] if s["session"]} & wanted

        async def spawn(name: str) -> asyncio.subprocess.Process:
            with open(self.tmp / f"{ars}-{name}.log", "wb") as log:  # noqa: ASYNC230
                return await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "arcflow.listener", env=env, stdout=log, stderr=log
                )

        first = await spawn("1")
        second: asyncio.subprocess.Process | None = None
        try:
            deadline = time.monotonic() + self.args.startup_timeout
            while sessions() != wanted:
                if time.monotonic() > deadline:
                    raise TimeoutError("sessions did not open")
                await asyncio.sleep(0.05)
            for ers in ids:
                sim.enqueue_jobs(self.args.jobs, [ers])
            await asyncio.sleep(self.args.kill_after)
            mark = len(sim.requests)
            first.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await first.wait()
            second = await spawn("2")
            polling: float | None = None
            scaled: float | None = None
            while polling is None or scaled is None:
                now = time.monotonic() - killed
                if now > self.args.recovery_timeout:
                    raise TimeoutError(f"not recovered within {self.args.recovery_timeout}s")
                after = list(sim.requests)[mark:]
                polled = {
                    scale_set_of(r.path)
                    for r in after
                    if r.method == "GET" and r.path.endswith("/messages") and r.status < 300
                }
                if polling is None and polled >= wanted:
                    polling = now
                if scaled is None:
                    listing = await kube.list("EphemeralRunnerSet", namespace=NAMESPACE)
                    mine = [o for o in listing.items if o["metadata"]["name"].startswith(ars)]
                    if all((o["spec"].get("replicas") or 0) == self.args.jobs for o in mine):
                        scaled = now
                await asyncio.sleep(0.02)
            conflicts = [
                r
                for r in list(sim.requests)[mark:]
                if r.method == "POST" and r.path.endswith("/sessions") and r.status == 409
            ]
        finally:
            for proc in (first, second):
                if proc is not None and proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(proc.wait(), 120)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
        return Run(run, len(ids), round(polling, 2), len(conflicts), round(scaled, 2))

    async def all_runs(self) -> list[Run]:
        runs: list[Run] = []
        async with self.world() as w:
            for run in range(1, self.args.runs + 1):
                result = await self.one(run, w.sim, w.kube, w.nats_url, w.kubeconfig)
                print(f"  {asdict(result)}", file=sys.stderr, flush=True)
                runs.append(result)
        return runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=100, help="burst jobs per variant")
    parser.add_argument("--kill-after", type=float, default=0.3, help="seconds into the burst")
    parser.add_argument("--poll-timeout", type=float, default=1.0, help="simulator long poll")
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--recovery-timeout", type=float, default=240.0)
    parser.add_argument("--pythonpath", default="", help="source trees to put first")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="benchmarks/results/listener_takeover.json")
    args = parser.parse_args(argv)
    args.pythonpath = [p for p in str(args.pythonpath).split(",") if p]
    return args


def main() -> None:
    args = parse_args()
    started = time.time()
    load_before = loadavg()
    runs = asyncio.run(Takeover(args).all_runs())
    polls = [r.all_polling_again_s for r in runs]
    print(
        f"every variant polling again after the kill: median {statistics.median(polls):.2f} s "
        f"(min {min(polls):.2f}, max {max(polls):.2f}); 409s: {[r.session_conflicts for r in runs]}"
    )
    settings = {k: getattr(args, k) for k in ("variants", "jobs", "kill_after", "poll_timeout")}
    write_runs(
        args.out,
        "listener_takeover",
        label=args.label,
        started=started,
        load_before=load_before,
        settings=settings,
        runs=runs,
    )


if __name__ == "__main__":
    main()
