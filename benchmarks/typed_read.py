"""The primary read of one reconcile pass, before and after ADR 0050, in isolation.

Before: ``ObjectCache.get`` hands out a copy of the cached object (ADR 0029's plain recursive
copy) and the controller works on the dict. After: the cached object itself
(``get(..., shared=True)``) parsed once with ``Kind.from_observed``. Objects are the ones a
burst reconciles most: an EphemeralRunner and an EphemeralRunnerSet of the example ARS
(``examples/02-runner-variants.yaml``), as the API server holds them (metadata, spec, status).
For the ARS, "with validation" adds what each pass does next: before, validate the manifest
(deep copy + parse + rules) and parse it (deep copy + parse) again; after, the rules on the
model.

    .venv/bin/python benchmarks/typed_read.py [--n 20000] [--runs 3] [--out typed-read.json]

Prints microseconds per read (best of 5 rounds, ``--runs`` times) and writes
benchmarks/results/typed-read.json (or ``--out``). Since ADR 0071 it also times the runner
pass with its JIT Secret and Pod parsed into their read models, and each of those parses.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from arcflow.common.builders import (
    BuildSettings,
    build_ephemeral_runner,
    build_jit_secret,
    build_runner_pod,
    desired_runner_sets,
)
from arcflow.common.cache.store import KindStore
from arcflow.common.models import (
    AutoscalingRunnerSet,
    EphemeralRunner,
    EphemeralRunnerSet,
    Pod,
    Secret,
)
from arcflow.common.validation import validate_manifest, validate_parsed

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "02-runner-variants.yaml"


def _observed(doc: dict[str, Any], name: str, uid: str) -> dict[str, Any]:
    """``doc`` as the API server returns it: name, uid, version, timestamps."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    meta = out.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta.update(
        name=name,
        uid=uid,
        resourceVersion="12345",
        generation=1,
        creationTimestamp="2026-11-30T12:00:00Z",
    )
    return out


def objects() -> dict[str, dict[str, Any]]:
    ars_doc = yaml.safe_load(EXAMPLE.read_text())
    ars_doc = _observed(ars_doc, ars_doc["metadata"]["name"], "uid-ars")
    ars = AutoscalingRunnerSet.from_manifest(ars_doc)
    ids = {v.name: index + 1 for index, v in enumerate(ars.spec.effective_variants())}
    settings = BuildSettings(controller_namespace="arc-systems", listener_image="listener:1")
    ers = _observed(desired_runner_sets(ars, ids, settings)[0], "ars-cpu", "uid-ers")
    ers["spec"].update(replicas=67, patchID=3)
    ers["status"] = {"currentReplicas": 67, "pendingEphemeralRunners": 10, "phase": "Running"}
    er = _observed(build_ephemeral_runner(ers, settings), "ars-cpu-runner-abcde", "uid-er")
    er["status"] = {"phase": "Running", "runnerId": 42, "runnerName": "ars-cpu-runner-abcde"}
    return {"AutoscalingRunnerSet": ars_doc, "EphemeralRunnerSet": ers, "EphemeralRunner": er}


def runner_pass_objects(er: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The other objects an EphemeralRunner pass reads: its JIT Secret and its Pod (running)."""
    settings = BuildSettings(controller_namespace="arc-systems", listener_image="listener:1")
    name = er["metadata"]["name"]
    secret = _observed(
        build_jit_secret(
            er, settings, encoded_jit_config="x" * 2000, runner_id=42, runner_name=name
        ),
        name,
        "uid-secret",
    )
    jit = {"jitToken": "x" * 2000, "runnerId": "42", "runnerName": name}
    pod = _observed(build_runner_pod(er, jit, settings), name, "uid-pod")
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "runner", "ready": True, "state": {"running": {}}}],
    }
    return {"Secret": secret, "Pod": pod}


def per_call_us(fn: Callable[[], object], n: int) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default="typed-read.json", help="file in benchmarks/results")
    args = parser.parse_args()
    runs = [measure(args.n) for _ in range(args.runs)]
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": list(os.getloadavg()),
        },
        "n": args.n,
        "runs": runs,
    }
    path = ROOT / "benchmarks" / "results" / args.out
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {path}")


def measure(n: int) -> dict[str, dict[str, float]]:
    models = {
        "AutoscalingRunnerSet": AutoscalingRunnerSet,
        "EphemeralRunnerSet": EphemeralRunnerSet,
        "EphemeralRunner": EphemeralRunner,
    }
    results: dict[str, dict[str, float]] = {}
    for kind, doc in objects().items():
        store = KindStore(kind)
        store.upsert(doc)
        ns, name = str(doc["metadata"].get("namespace") or ""), doc["metadata"]["name"]
        model = models[kind]

        def before(store: KindStore = store, ns: str = ns, name: str = name) -> object:
            return store.get(ns, name)

        def after(
            store: KindStore = store, ns: str = ns, name: str = name, model: Any = model
        ) -> object:
            found = store.get(ns, name, shared=True)
            assert found is not None
            return model.from_observed(found)

        row = {"before_us": per_call_us(before, n), "after_us": per_call_us(after, n)}
        if kind == "AutoscalingRunnerSet":

            def before_ars(store: KindStore = store, ns: str = ns, name: str = name) -> object:
                found = store.get(ns, name)
                assert found is not None
                validate_manifest(found)
                return AutoscalingRunnerSet.from_manifest(found)

            def after_ars(store: KindStore = store, ns: str = ns, name: str = name) -> object:
                found = store.get(ns, name, shared=True)
                assert found is not None
                parsed = AutoscalingRunnerSet.from_observed(found)
                validate_parsed(parsed)
                return parsed

            row["before_with_validation_us"] = per_call_us(before_ars, max(1, n // 10))
            row["after_with_validation_us"] = per_call_us(after_ars, max(1, n // 10))
        results[kind] = {k: round(v, 2) for k, v in row.items()}
        print(kind, results[kind])
    # A whole EphemeralRunner pass: the runner, then its JIT Secret and Pod (before: three
    # copies; after: the runner parsed, the Secret and Pod shared).
    er = objects()["EphemeralRunner"]
    stores = {"EphemeralRunner": KindStore("EphemeralRunner")}
    stores["EphemeralRunner"].upsert(er)
    for kind, doc in runner_pass_objects(er).items():
        stores[kind] = KindStore(kind)
        stores[kind].upsert(doc)
    ns, name = er["metadata"]["namespace"], er["metadata"]["name"]

    def before_pass() -> object:
        return [store.get(ns, name) for store in stores.values()]

    def after_pass() -> object:
        found = stores["EphemeralRunner"].get(ns, name, shared=True)
        assert found is not None
        parsed = EphemeralRunner.from_observed(found)
        return [parsed, *(stores[k].get(ns, name, shared=True) for k in ("Secret", "Pod"))]

    def typed_pass() -> object:
        found = stores["EphemeralRunner"].get(ns, name, shared=True)
        secret = stores["Secret"].get(ns, name, shared=True)
        pod = stores["Pod"].get(ns, name, shared=True)
        assert found is not None
        assert secret is not None
        assert pod is not None
        return [
            EphemeralRunner.from_observed(found),
            Secret.from_observed(secret),
            Pod.from_observed(pod),
        ]

    results["EphemeralRunner pass (runner, JIT Secret, Pod)"] = {
        "before_us": round(per_call_us(before_pass, n), 2),
        "after_us": round(per_call_us(after_pass, n), 2),
        # ADR 0071: the Secret and the Pod parsed into their read models too.
        "typed_children_us": round(per_call_us(typed_pass, n), 2),
    }
    print("EphemeralRunner pass", results["EphemeralRunner pass (runner, JIT Secret, Pod)"])
    # ADR 0071: the children's read models alone, and a 200-runner burst's worth of them.
    for kind, model in (("Pod", Pod), ("Secret", Secret)):
        doc = stores[kind].get(ns, name, shared=True)
        assert doc is not None
        per = per_call_us(lambda doc=doc, model=model: model.from_observed(doc), n)
        results[f"{kind} read model"] = {"parse_us": round(per, 2), "x200_ms": round(per * 0.2, 2)}
        print(kind, results[f"{kind} read model"])
    return results


if __name__ == "__main__":
    main()
