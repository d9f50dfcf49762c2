"""Who deletes a finished runner's Pod and JIT Secret: the garbage collector or arcflow?

On a real control plane, N EphemeralRunners each own a Pod and a Secret (ownerReferences as the
reconciler writes them). Then they are cleaned up in one of two ways, with the same client
concurrency the reconciler uses (16 requests in flight):

- ``gc``: only the EphemeralRunners are deleted; kube-controller-manager's garbage collector
  deletes their Pods and Secrets (what ADR 0011 chose);
- ``explicit``: the Pods and Secrets are deleted first, then the EphemeralRunners (what
  upstream ARC's runner controller does).

Measured per round: seconds from the first delete until every Pod and Secret is gone, and the
requests each side sent, counted by the API server's audit log (user agent
``kube-controller-manager`` for the collector, everything else but the benchmark's own polling
lists is ours). Rounds alternate the
two modes so load drifts hit both alike.

    .venv/bin/python benchmarks/gc_cleanup.py --runners 200 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.devstack.control_plane import ControlPlane

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
LABEL = "arcflow.io/gc-bench"


def _runner(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "1"}},
        "spec": {
            "githubConfigUrl": "https://github.com/acme",
            "githubConfigSecret": "github-creds",
            "runnerScaleSetId": 1,
        },
    }


def _owned(kind: str, owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    base: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {LABEL: "1"},
            "ownerReferences": [reference],
        },
    }
    if kind == "Secret":
        base["stringData"] = {"jitToken": "not-a-real-token"}
    else:
        base["spec"] = {
            "restartPolicy": "Never",
            "containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}],
        }
    return base


async def _bounded(calls: list[Any]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def run(call: Any) -> None:
        async with gate:
            await call

    await asyncio.gather(*(run(call) for call in calls))


async def _left(kube: KubeClient, namespace: str) -> int:
    pods = await kube.list("Pod", namespace=namespace, label_selector={LABEL: "1"})
    found = await kube.list("Secret", namespace=namespace, label_selector={LABEL: "1"})
    return len(pods.items) + len(found.items)


def _audit_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    lines = [json.loads(line) for line in data.splitlines() if line.strip()]
    return lines, offset + len(data)


def _count(events: list[dict[str, Any]], namespace: str) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {"collector": Counter(), "ours": Counter()}
    for event in events:
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace or event.get("verb") in ("watch",):
            continue
        who = (
            "collector"
            if str(event.get("userAgent", "")).startswith("kube-controller-manager")
            else "ours"
        )
        if who == "ours" and event.get("verb") == "list":
            continue  # the benchmark's own polling for "all gone", not the clean-up
        counts[who][f"{event['verb']} {ref.get('resource')}"] += 1
    return counts


async def one_round(
    plane: ControlPlane, kube: KubeClient, runners: int, mode: str
) -> dict[str, Any]:
    namespace = f"gc-bench-{secrets.token_hex(3)}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    # The namespace's default ServiceAccount (the admission plugin refuses pods before it).
    while True:
        try:
            await kube.get("ServiceAccount", "default", namespace)
            break
        except Exception:
            await asyncio.sleep(0.05)
    owners: list[dict[str, Any]] = []

    async def make(index: int) -> None:
        owner = await kube.create(_runner(namespace, f"runner-{index:04d}"))
        owners.append(owner)
        await kube.create(_owned("Pod", owner))
        await kube.create(_owned("Secret", owner))

    await _bounded([make(i) for i in range(runners)])
    _, offset = _audit_lines(plane.audit_log, 0)
    started = time.monotonic()
    if mode == "explicit":
        await _bounded(
            [
                kube.delete(kind, o["metadata"]["name"], namespace=namespace)
                for o in owners
                for kind in ("Pod", "Secret")
            ]
        )
    await _bounded(
        [kube.delete("EphemeralRunner", o["metadata"]["name"], namespace=namespace) for o in owners]
    )
    deadline = started + 300
    while True:
        if not await _left(kube, namespace) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    seconds = time.monotonic() - started
    left = await _left(kube, namespace)
    await asyncio.sleep(1.0)  # the audit log is written when each request completes
    events, _ = _audit_lines(plane.audit_log, offset)
    counts = _count(events, namespace)
    await kube.delete("Namespace", namespace)
    return {
        "mode": mode,
        "runners": runners,
        "seconds_until_all_gone": round(seconds, 3),
        "left_at_deadline": left,
        "requests_ours": sum(counts["ours"].values()),
        "requests_collector": sum(counts["collector"].values()),
        "ours": dict(counts["ours"]),
        "collector": dict(counts["collector"]),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/gc-cleanup.json"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    with ControlPlane(audit=True) as plane:
        kube = await KubeClient.from_settings(
            KubeSettings(kubeconfig=str(plane.kubeconfig), qps=200, burst=400)
        )
        async with kube:
            for index in range(args.rounds):
                for mode in ("gc", "explicit") if index % 2 == 0 else ("explicit", "gc"):
                    result = await one_round(plane, kube, args.runners, mode)
                    result["load"] = os.getloadavg()[0]
                    brief = {k: v for k, v in result.items() if k not in ("ours", "collector")}
                    print(json.dumps(brief))
                    rounds.append(result)
    document = {
        "benchmark": "gc_cleanup",
        "machine": {"cpus": os.cpu_count()},
        "kubernetes": plane.version,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "concurrency": CONCURRENCY,
        "rounds": rounds,
    }
    _write(Path(args.out), document)


def _write(out: Path, document: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
