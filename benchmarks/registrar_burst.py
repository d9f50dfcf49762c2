"""Benchmark (issue 12 item 6): N AutoscalingRunnerSets x V variants applied at once, with the
Kubernetes client's QPS raised, through the real watcher and registrar (in-process, on the
service runtime) against the Kubernetes API emulator, the Actions simulator and a nats-server.

Reports the time until every scale set is registered and announced (``scaleset.assigned`` on
``ARC_SCALESETS``), whether the ``registrar-ars`` consumer drained (nothing pending, nothing
unacked), and how many consumers remain on the scale-set KV stream after the burst (KV
snapshot watches must not leak). Not a test.

    .venv/bin/python benchmarks/registrar_burst.py --ars 100 --variants 10 --qps 1000

``--baseline REF`` measures the registrar of a git ref (its ``services/registrar/src``, taken
with ``git archive``) beside this checkout's, alternating, ``--rounds`` times each, every round
in a fresh process on fresh servers (ADR 0072 measured main's converge against its work
queue this way):

    .venv/bin/python benchmarks/registrar_burst.py --baseline main --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.nats import CONSUMER_REGISTRAR_ARS, KV_SCALESETS, STREAM_SCALESETS, NatsSettings
from arcflow.common.service.inprocess import ServiceRun, running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.watcher.service import SERVICE as WATCHER
from arcflow.watcher.settings import WatcherSettings

NAMESPACE = "burst"


def _ars(name: str, variants: int, config_url: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "runner", "image": "runner:latest"}]}}
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": "creds",
            "template": template,
            "runnerVariants": [{"name": f"v{i}"} for i in range(variants)],
        },
    }


def _passes(state: Any) -> int:
    """Converge passes that finished (after ADR 0072) or change events handled (before)."""
    return int(getattr(state, "handled", 0))


def _ars_reads(state: Any) -> int:
    context = getattr(state, "context", None)
    reads = context.reads if context is not None else state.registrar
    return int(reads.ars_reads)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from arcflow.registrar.service import SERVICE as REGISTRAR
    from arcflow.registrar.settings import RegistrarSettings

    tmp = Path(tempfile.mkdtemp(prefix="burst-"))
    with NatsServer() as server:
        async with ActionsSimulator() as sim, KubeEmulator(history_limit=5000) as emulator:
            kubeconfig = emulator.write_kubeconfig(tmp / "kubeconfig")
            kube_settings = KubeSettings(
                kubeconfig=str(kubeconfig), qps=args.qps, burst=int(args.qps)
            )
            kube = await KubeClient.from_settings(kube_settings)
            async with kube:
                await kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
                )
                token = base64.b64encode(sim.add_pat().encode()).decode()
                await kube.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": "creds", "namespace": NAMESPACE},
                        "data": {"github_token": token},
                    }
                )
                nats_settings = NatsSettings(url=server.url)
                runs = [
                    ServiceRun(
                        WATCHER,
                        WatcherSettings(namespaces=[NAMESPACE], kube=kube_settings),
                        nats_settings,
                    ),
                    ServiceRun(REGISTRAR, RegistrarSettings(instance="burst"), nats_settings),
                ]
                async with running(*runs, kube=kube) as runtimes:
                    started = time.perf_counter()
                    await asyncio.gather(
                        *(
                            kube.create(_ars(f"ars-{i}", args.variants, sim.config_url()))
                            for i in range(args.ars)
                        )
                    )
                    applied = time.perf_counter() - started
                    wanted = args.ars * args.variants
                    nc = await nats.connect(server.url)
                    js = nc.jetstream()
                    deadline = started + args.timeout
                    registered = 0
                    announced = 0
                    while time.perf_counter() < deadline:
                        registered = len(sim.snapshot()["scaleSets"])
                        info = await js.consumer_info(
                            CONSUMER_REGISTRAR_ARS.stream, CONSUMER_REGISTRAR_ARS.durable
                        )
                        announced = (await js.stream_info(STREAM_SCALESETS.name)).state.messages
                        drained = (info.num_pending, info.num_ack_pending) == (0, 0)
                        if registered >= wanted and announced >= wanted and drained:
                            break
                        await asyncio.sleep(0.5)
                    elapsed = time.perf_counter() - started
                    await asyncio.sleep(args.settle)
                    kv_stream = f"KV_{KV_SCALESETS.bucket}"
                    kv_consumers = (await js.stream_info(kv_stream)).state.consumer_count
                    info = await js.consumer_info(
                        CONSUMER_REGISTRAR_ARS.stream, CONSUMER_REGISTRAR_ARS.durable
                    )
                    await nc.drain()
                    state = runtimes[REGISTRAR.name].state
                    passes, ars_reads = _passes(state), _ars_reads(state)
    return {
        "registrar_source": sys.modules["arcflow.registrar"].__path__[0],
        "ars": args.ars,
        "variants": args.variants,
        "qps": args.qps,
        "apply_seconds": round(applied, 2),
        "scale_sets_wanted": wanted,
        "scale_sets_registered": registered,
        "scale_set_events": announced,
        "registrar_passes_or_events_handled": passes,
        "ars_reads_over_http": ars_reads,
        "seconds_until_all_registered_and_drained": round(elapsed, 2),
        "registrar_ars_pending": info.num_pending,
        "registrar_ars_ack_pending": info.num_ack_pending,
        "kv_scalesets_consumers_after_settle": kv_consumers,
        "loadavg": os.getloadavg(),
    }


def _baseline_source(ref: str, into: Path) -> Path:
    """``services/registrar/src`` of ``ref``, unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "archive", ref, "services/registrar/src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "services" / "registrar" / "src"


def _round(args: argparse.Namespace, source: Path | None, out: Path) -> dict[str, Any]:
    """One burst in a fresh process (``source`` first on its path when given)."""
    command = [sys.executable, __file__, "--ars", str(args.ars), "--variants", str(args.variants)]
    command += ["--qps", str(args.qps), "--timeout", str(args.timeout)]
    command += ["--settle", str(args.settle), "--out", str(out)]
    if source is not None:
        command += ["--registrar-src", str(source)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Baseline and this checkout, alternating, ``args.rounds`` times each."""
    tmp = Path(tempfile.mkdtemp(prefix="burst-compare-"))
    source = _baseline_source(args.baseline, tmp)
    rounds: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for index in range(args.rounds):
        for label, src in (("before", source), ("after", None)):
            result = _round(args, src, tmp / f"{label}-{index}.json")
            rounds[label].append(result)
            print(label, json.dumps(result), flush=True)
    key = "seconds_until_all_registered_and_drained"
    medians = {
        label: statistics.median(r[key] for r in results) for label, results in rounds.items()
    }
    return {
        "baseline": args.baseline,
        "rounds": rounds,
        "median_seconds": medians,
        "after_over_before": round(medians["after"] / medians["before"], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ars", type=int, default=100)
    parser.add_argument("--variants", type=int, default=10)
    parser.add_argument("--qps", type=float, default=1000.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--settle", type=float, default=10.0, help="idle seconds before counting")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/registrar-burst.json"))
    parser.add_argument("--baseline", default="", help="a git ref to measure beside this checkout")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each, with --baseline")
    parser.add_argument("--registrar-src", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.registrar_src is not None:
        # A baseline's registrar package first: ``arcflow`` is a namespace package, so
        # ``arcflow.registrar`` is taken from the first path portion that has it.
        sys.path.insert(0, str(args.registrar_src.resolve()))
    result = compare(args) if args.baseline else asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
