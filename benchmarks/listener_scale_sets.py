"""Benchmark: one listener process serving N scale sets vs N single-scale-set listener processes.

Not a test. Starts one Actions simulator, one Kubernetes API emulator (both in this process)
and one nats-server, then for each N runs, one after the other:

* ``multi``:  one ``python -m arcflow.listener`` whose config.json lists N ``scale_sets``;
* ``single``: N ``python -m arcflow.listener`` processes, one scale set each (upstream's shape).

For each case it records the start-up time (until every session is open), resident memory
(sum of VmRSS of the listener processes, from /proc) and CPU time (utime+stime from /proc) at
idle after a settle period, and during a job burst (``--jobs`` per scale set): the time until
every EphemeralRunnerSet reached its desired count, and the CPU used from the enqueue until
``--tail`` seconds after that. Prints a table and writes JSON.

    .venv/bin/python benchmarks/listener_scale_sets.py --n 1,10 --out /tmp/listener-bench.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import nats

from arcflow.common.actions import ActionsClient, Label, PatCredentials, RetryPolicy, RunnerScaleSet
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.listener_config import ListenerConfig, ScaleSetConfig
from arcflow.common.nats import STREAM_ERRORS, ensure_stream
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.devstack.pod_runner import LISTENER_IMAGE_ENV

CLK_TCK = os.sysconf("SC_CLK_TCK")
NAMESPACE = "bench"


@dataclass
class CaseResult:
    mode: str
    n: int
    processes: int
    startup_seconds: float
    idle_rss_mib: float
    idle_cpu_seconds: float
    idle_window_seconds: float
    idle_cpu_percent: float
    burst_jobs: int
    burst_seconds: float
    burst_cpu_seconds: float
    burst_rss_mib: float
    exit_codes_ok: bool
    idle_pss_mib: float = 0.0


def scale_set_of(path: str) -> int:
    """The scale set id in a simulator request path (``.../runnerscalesets/<id>/...``)."""
    return int(path.split("/runnerscalesets/")[1].split("/")[0])


def proc_usage(pid: int) -> tuple[float, float]:
    """(resident MiB, CPU seconds) of one process, read from /proc."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    rss_kib = 0
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return rss_kib / 1024, cpu


#: Where listener processes keep their bytecode: the image compiles it at build
#: (``UV_COMPILE_BYTECODE=1``), so a benchmark should not measure compiling every module.
BYTECODE_CACHE = os.path.join(tempfile.gettempdir(), "arcflow-bench-pycache")


def with_bytecode(env: dict[str, str], cache: str = BYTECODE_CACHE) -> dict[str, str]:
    """``env`` with a bytecode cache even where ``PYTHONDONTWRITEBYTECODE`` is set."""
    if not cache:
        return env
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = cache
    return out


def proc_pss_mib(pid: int) -> float:
    """Proportional set size: shared pages (libpython, OpenSSL, ...) divided among processes,
    so the sum over processes is the memory they take together."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def total_usage(pids: list[int]) -> tuple[float, float]:
    rss = cpu = 0.0
    for pid in pids:
        r, c = proc_usage(pid)
        rss += r
        cpu += c
    return rss, cpu


async def wait_for(predicate: Any, within: float, what: str) -> float:
    start = time.monotonic()
    while True:
        if await predicate():
            return time.monotonic() - start
        if time.monotonic() - start > within:
            raise TimeoutError(f"{what} not reached within {within}s")
        await asyncio.sleep(0.2)


@dataclass
class World:
    """What every listener benchmark runs against: a nats-server, the Actions simulator, the
    Kubernetes API emulator (its namespace created) and a client with its kubeconfig."""

    nats_url: str
    sim: ActionsSimulator
    kube: KubeClient
    kubeconfig: Path


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="listener-bench-"))

    def by_name(self, text: str) -> str:
        """``--hostname``: the listener reaches the simulator and the API server by a host
        name (resolved by getaddrinfo in the loop's thread pool, as a pod resolves
        ``api.github.com`` and ``kubernetes.default.svc``) instead of 127.0.0.1."""
        host = getattr(self.args, "hostname", "")
        return text.replace("127.0.0.1", host) if host else text

    def listener_env(
        self, name: str, config: ListenerConfig, nats_url: str, kubeconfig: Path
    ) -> dict[str, str]:
        """Writes ``config`` as ``<name>.json`` and returns the environment of a listener
        process reading it (``--pythonpath`` first on the path, bytecode cached)."""
        path = self.tmp / f"{name}.json"
        path.write_text(config.to_json())
        env = {
            **os.environ,
            **LISTENER_IMAGE_ENV,  # as the listener image runs it (optimize level 2)
            "LISTENER_CONFIG_PATH": str(path),
            "ARCFLOW_NATS_URL": nats_url,
            "ARCFLOW_KUBE_KUBECONFIG": str(kubeconfig),
        }
        pythonpath = getattr(self.args, "pythonpath", None)
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        if not getattr(self.args, "no_bytecode_cache", False):
            env = with_bytecode(env)  # else every start compiles (PYTHONDONTWRITEBYTECODE=1)
        env.update(getattr(self.args, "listener_env", None) or {})  # --env wins
        return env

    @contextlib.asynccontextmanager
    async def world(self, *, history_limit: int = 100) -> AsyncIterator[World]:
        with NatsServer() as nats_server:
            async with (
                ActionsSimulator(poll_timeout=self.args.poll_timeout) as sim,
                KubeEmulator(history_limit=history_limit) as emulator,
            ):
                # The stream the watcher declares in the stack (the listener publishes its
                # session events there, and never declares it): without it every session open
                # is a failed publish, which is not what a listener does in the stack.
                if not getattr(self.args, "no_errors_stream", False):
                    nc = await nats.connect(nats_server.url)
                    try:
                        await ensure_stream(nc.jetstream(), STREAM_ERRORS)
                    finally:
                        await nc.close()
                # JSON (valid YAML): in a pod (in-cluster) no YAML is parsed either.
                kubeconfig = self.tmp / "kubeconfig.json"
                kubeconfig.write_text(self.by_name(json.dumps(emulator.kubeconfig())))
                kube = await KubeClient.from_settings(
                    KubeSettings(kubeconfig=str(kubeconfig), qps=10_000, burst=10_000)
                )
                async with kube:
                    await kube.create(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
                    )
                    yield World(nats_server.url, sim, kube, kubeconfig)

    async def prepare(
        self, sim: ActionsSimulator, kube: KubeClient, ars: str, n: int, token: str
    ) -> dict[str, int]:
        ids: dict[str, int] = {}
        async with ActionsClient(
            sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
        ) as client:
            for i in range(n):
                ers = f"{ars}-v{i}"
                created = await client.create_runner_scale_set(
                    RunnerScaleSet(name=ers, labels=[Label(name=ers)])
                )
                ids[ers] = created.id
                await kube.create(
                    {
                        "apiVersion": "actions.github.com/v1alpha1",
                        "kind": "EphemeralRunnerSet",
                        "metadata": {"name": ers, "namespace": NAMESPACE},
                        "spec": {"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": {}},
                    }
                )
        return ids

    def configs(
        self, sim: ActionsSimulator, token: str, ars: str, ids: dict[str, int], mode: str
    ) -> list[ListenerConfig]:
        common: dict[str, Any] = {
            "configure_url": self.by_name(sim.config_url()),
            "github_token": token,
            "ephemeral_runner_set_namespace": NAMESPACE,
            "runner_scale_set_name": ars,
            "log_level": "warn",
            "log_format": "json",
        }
        if mode == "multi":
            sets = [
                ScaleSetConfig(
                    runner_scale_set_id=sid,
                    runner_scale_set_name=ers,
                    ephemeral_runner_set_name=ers,
                    max_runners=self.args.jobs * 2,
                )
                for ers, sid in ids.items()
            ]
            return [ListenerConfig(scale_sets=sets, **common)]
        return [
            ListenerConfig(
                ephemeral_runner_set_name=ers,
                runner_scale_set_id=sid,
                max_runners=self.args.jobs * 2,
                **common,
            )
            for ers, sid in ids.items()
        ]

    async def run_case(
        self,
        mode: str,
        n: int,
        sim: ActionsSimulator,
        kube: KubeClient,
        nats_url: str,
        kubeconfig: Path,
    ) -> CaseResult:
        ars = f"{mode}{n}"
        token = sim.add_pat()
        ids = await self.prepare(sim, kube, ars, n, token)
        configs = self.configs(sim, token, ars, ids, mode)
        procs = []
        logs = []
        for index, config in enumerate(configs):
            env = self.listener_env(f"{ars}-{index}", config, nats_url, kubeconfig)
            log = open(self.tmp / f"{ars}-{index}.log", "wb")  # noqa: SIM115, ASYNC230 - closed below
            logs.append(log)
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "arcflow.listener", env=env, stdout=log, stderr=log
                )
            )
        pids = [p.pid for p in procs]
        wanted = set(ids.values())

        async def sessions_open() -> bool:
            live = {s["id"] for s in sim.snapshot()["scaleSets"] if s["session"] is not None}
            return wanted <= live

        try:
            startup = await wait_for(sessions_open, self.args.startup_timeout, "all sessions")
            await asyncio.sleep(self.args.settle)
            _rss0, cpu0 = total_usage(pids)
            await asyncio.sleep(self.args.window)
            idle_rss, cpu1 = total_usage(pids)
            idle_pss = sum(proc_pss_mib(pid) for pid in pids)
            idle_cpu = cpu1 - cpu0

            for ers in ids:
                sim.enqueue_jobs(self.args.jobs, [ers])

            async def all_scaled() -> bool:
                listing = await kube.list("EphemeralRunnerSet", namespace=NAMESPACE)
                mine = [o for o in listing.items if o["metadata"]["name"].startswith(ars + "-")]
                return len(mine) == n and all(
                    (o["spec"].get("replicas") or 0) == self.args.jobs for o in mine
                )

            burst = await wait_for(all_scaled, self.args.burst_timeout, "burst scaled")
            await asyncio.sleep(self.args.tail)  # let the last decisions and acks finish
            burst_rss, cpu2 = total_usage(pids)
            burst_cpu = cpu2 - cpu1
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
            codes = [await asyncio.wait_for(p.wait(), 60) for p in procs]
            for log in logs:
                log.close()
        window = self.args.window
        return CaseResult(
            mode=mode,
            n=n,
            processes=len(procs),
            startup_seconds=round(startup, 2),
            idle_rss_mib=round(idle_rss, 1),
            idle_cpu_seconds=round(idle_cpu, 3),
            idle_window_seconds=window,
            idle_cpu_percent=round(100 * idle_cpu / window, 2),
            burst_jobs=self.args.jobs * n,
            burst_seconds=round(burst, 2),
            burst_cpu_seconds=round(burst_cpu, 3),
            burst_rss_mib=round(burst_rss, 1),
            exit_codes_ok=all(code == 0 for code in codes),
            idle_pss_mib=round(idle_pss, 1),
        )

    async def main(self) -> list[CaseResult]:
        results: list[CaseResult] = []
        async with self.world() as w:
            for n in self.args.n:
                for mode in self.args.modes:
                    print(f"running {mode} N={n} ...", file=sys.stderr, flush=True)
                    result = await self.run_case(mode, n, w.sim, w.kube, w.nats_url, w.kubeconfig)
                    print(f"  {asdict(result)}", file=sys.stderr, flush=True)
                    results.append(result)
        return results


def table(results: list[CaseResult]) -> str:
    head = (
        f"{'N':>4} {'mode':<7} {'procs':>5} {'start s':>8} {'idle RSS MiB':>13} "
        f"{'idle CPU %':>10} {'burst s':>8} {'burst CPU s':>11} {'burst RSS MiB':>14} "
        f"{'idle PSS MiB':>13}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r.n:>4} {r.mode:<7} {r.processes:>5} {r.startup_seconds:>8.1f} "
            f"{r.idle_rss_mib:>13.1f} {r.idle_cpu_percent:>10.2f} {r.burst_seconds:>8.1f} "
            f"{r.burst_cpu_seconds:>11.2f} {r.burst_rss_mib:>14.1f} {r.idle_pss_mib:>13.1f}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1,10,100", help="comma-separated scale set counts")
    parser.add_argument(
        "--modes", default="multi,single", help="which cases to run (multi, single or both)"
    )
    parser.add_argument("--jobs", type=int, default=5, help="burst jobs per scale set")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before idle sample")
    parser.add_argument("--window", type=float, default=20.0, help="idle sampling window (s)")
    parser.add_argument("--tail", type=float, default=2.0, help="burst CPU tail (s)")
    parser.add_argument("--poll-timeout", type=float, default=20.0, help="simulator long poll")
    parser.add_argument("--startup-timeout", type=float, default=900.0)
    parser.add_argument("--burst-timeout", type=float, default=300.0)
    parser.add_argument("--out", default="benchmarks/results/listener_scale_sets.json")
    args = parser.parse_args(argv)
    args.n = [int(x) for x in str(args.n).split(",") if x.strip()]
    args.modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    if not set(args.modes) <= {"multi", "single"} or not args.modes:
        parser.error("--modes takes multi and/or single")
    if not args.n or min(args.n) < 1:
        parser.error("--n needs positive integers")
    return args


def main() -> None:
    args = parse_args()
    started = time.time()
    results = asyncio.run(Bench(args).main())
    print(table(results))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "listener_scale_sets",
                "started_at": started,
                "duration_seconds": round(time.time() - started, 1),
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "settings": {
                    "jobs_per_scale_set": args.jobs,
                    "settle_seconds": args.settle,
                    "idle_window_seconds": args.window,
                    "burst_tail_seconds": args.tail,
                    "poll_timeout_seconds": args.poll_timeout,
                },
                "results": [asdict(r) for r in results],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
