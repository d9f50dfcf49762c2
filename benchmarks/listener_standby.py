"""Benchmark: how soon a standby listener serves the sets of a SIGKILLed replica (issue 14
item 3, ADR 0025).

Not a test. Starts nats-server, the Actions simulator and the Kubernetes emulator (in this
process). Per run: two ``python -m arcflow.listener`` replicas (``ARCFLOW_LISTENER_REPLICAS=2``)
serve ``--variants`` scale sets between them; once every session is open and the leases are
spread, half a burst of ``--jobs`` jobs per variant is enqueued, the replica holding the first
share is SIGKILLed ``--kill-after`` seconds later, and the rest of the burst follows the kill.
Nothing is restarted: the other replica must take over. Measured from the kill: seconds until
every set of the killed replica has a new session, and until the simulator has answered a
message poll of each in that new session (answers come within ``--poll-timeout``); the 409
answers to session creates; seconds until every ERS shows the whole burst.

    .venv/bin/python benchmarks/listener_standby.py --runs 3
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

import nats
import nats.js.errors
from _report import loadavg, write_runs
from listener_scale_sets import NAMESPACE, Bench, scale_set_of

from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.listener.lease import LEASES_BUCKET, LeaseRecord
from arcflow.listener.sessions import SESSIONS_BUCKET, SessionStore


@dataclass
class Run:
    run: int
    variants: int
    taken_over: int
    new_sessions_s: float
    polling_again_s: float
    session_conflicts: int
    all_scaled_s: float


async def lease_holders(nats_url: str) -> dict[int, str]:
    nc = await nats.connect(nats_url)
    try:
        try:
            kv = await nc.jetstream().key_value(LEASES_BUCKET.bucket)
            keys = await kv.keys()
        except (nats.js.errors.BucketNotFoundError, nats.js.errors.NoKeysError):
            return {}
        out = {}
        for key in keys:
            if not key.isdigit():
                continue
            try:
                record = LeaseRecord.decode((await kv.get(key)).value)
            except nats.js.errors.KeyNotFoundError:
                continue
            if record is not None:
                out[int(key)] = record.holder
        return out
    finally:
        await nc.close()


async def remembered(nats_url: str) -> dict[int, str]:
    """Scale set id -> session id, as the sessions bucket records them."""
    nc = await nats.connect(nats_url)
    try:
        try:
            kv = await nc.jetstream().key_value(SESSIONS_BUCKET.bucket)
        except nats.js.errors.BucketNotFoundError:
            return {}
        return {k: r.session_id for k, r in (await SessionStore(kv).records()).items()}
    finally:
        await nc.close()


class Standby(Bench):
    async def one(
        self, run: int, sim: ActionsSimulator, kube: KubeClient, nats_url: str, kubeconfig: Path
    ) -> Run:
        ars = f"sb{run}"
        token = sim.add_pat()
        ids = await self.prepare(sim, kube, ars, self.args.variants, token)
        (config,) = self.configs(sim, token, ars, ids, "multi")
        base_env = self.listener_env(ars, config, nats_url, kubeconfig)
        wanted = set(ids.values())

        def sessions() -> dict[int, str]:
            return {
                s["id"]: s["session"]["sessionId"]
                for s in sim.snapshot()["scaleSets"]
                if s["session"] and s["id"] in wanted
            }

        async def spawn(replica: int) -> asyncio.subprocess.Process:
            env = {
                **base_env,
                "ARCFLOW_LISTENER_REPLICAS": "2",
                "ARCFLOW_LISTENER_REPLICA": str(replica),
            }
            with open(self.tmp / f"{ars}-{replica}.log", "wb") as log:  # noqa: ASYNC230
                return await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "arcflow.listener", env=env, stdout=log, stderr=log
                )

        procs = [await spawn(0), await spawn(1)]
        try:
            deadline = time.monotonic() + self.args.startup_timeout
            while True:
                holders = {k: v for k, v in (await lease_holders(nats_url)).items() if k in wanted}
                owners = {h.rsplit("/", 1)[1] for h in holders.values()}
                ready = set(sessions()) == wanted and set(holders) == wanted
                recorded = {k: v for k, v in (await remembered(nats_url)).items() if k in wanted}
                if ready and owners == {"0", "1"} and recorded == sessions():
                    break  # every session recorded: a kill before that is ADR 0015's window
                if time.monotonic() > deadline:
                    raise TimeoutError(f"sessions or spread leases not ready: {holders}")
                await asyncio.sleep(0.1)
            victim = {sid for sid, h in holders.items() if h.endswith("/0")}
            old = sessions()
            first_half = self.args.jobs // 2
            for ers in ids:
                sim.enqueue_jobs(first_half, [ers])
            await asyncio.sleep(self.args.kill_after)
            mark = len(sim.requests)
            procs[0].send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await procs[0].wait()
            for ers in ids:  # the rest of the burst arrives while the sets change hands
                sim.enqueue_jobs(self.args.jobs - first_half, [ers])
            new_at: dict[int, float] = {}
            new_mark: dict[int, int] = {}
            polled_at: dict[int, float] = {}
            scaled: float | None = None
            while len(polled_at) < len(victim) or scaled is None:
                now = time.monotonic() - killed
                if now > self.args.recovery_timeout:
                    raise TimeoutError(f"not recovered within {self.args.recovery_timeout}s")
                current = sessions()
                requests = list(sim.requests)
                for sid in victim:
                    if sid not in new_at and current.get(sid) not in (None, old[sid]):
                        new_at[sid], new_mark[sid] = now, len(requests)
                    if (
                        sid in new_mark
                        and sid not in polled_at
                        and any(
                            r.method == "GET"
                            and r.path.endswith("/messages")
                            and r.status < 300
                            and scale_set_of(r.path) == sid
                            for r in requests[new_mark[sid] :]
                        )
                    ):
                        polled_at[sid] = now
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
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(proc.wait(), 120)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
        return Run(
            run,
            len(ids),
            len(victim),
            round(max(new_at.values()), 2),
            round(max(polled_at.values()), 2),
            len(conflicts),
            round(scaled, 2),
        )

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
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=100, help="burst jobs per variant")
    parser.add_argument("--kill-after", type=float, default=0.3, help="seconds into the burst")
    parser.add_argument("--poll-timeout", type=float, default=1.0, help="simulator long poll")
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--recovery-timeout", type=float, default=240.0)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="benchmarks/results/listener_standby.json")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    started = time.time()
    load_before = loadavg()
    runs = asyncio.run(Standby(args).all_runs())
    polls = [r.polling_again_s for r in runs]
    print(
        f"killed replica's sets polling again on the standby: median "
        f"{statistics.median(polls):.2f} s (min {min(polls):.2f}, max {max(polls):.2f}); "
        f"409s: {[r.session_conflicts for r in runs]}"
    )
    settings = {k: getattr(args, k) for k in ("variants", "jobs", "kill_after", "poll_timeout")}
    write_runs(
        args.out,
        "listener_standby",
        label=args.label,
        started=started,
        load_before=load_before,
        settings=settings,
        runs=runs,
    )


if __name__ == "__main__":
    main()
