"""Where the kube-apiserver spends its CPU in a run: two sides' profiles, grouped.

Not a test. Reads the CPU profiles that ``ARCFLOW_BENCH_APISERVER_PPROF`` makes a
benchmark's runs take (``_pprof.py``; a pipeline burst takes one of the floor's run and one of
arcflow's), asks ``go tool pprof`` for every function's cumulative time, and reports, per
profile and as medians per side, the seconds under each of a few places in the server: the
request handlers by verb, serving watches, the watch cache's fan-out, the audit log, the
garbage collector, TLS. The places overlap (a handler's time includes its GC assists and its
TLS writes); each is a question ("how much does serving watches cost here?"), not a share.

    ARCFLOW_BENCH_APISERVER_PPROF=40 .venv/bin/python benchmarks/pipeline.py --mode burst \\
        --jobs 600 --kube apiserver --runs 3 --direct --max-load 2.5 --label pprof-600
    .venv/bin/python benchmarks/apiserver_profile.py --runners 600 \\
        --side floor=/tmp/arcflow-apiserver-pprof/floor-600-* \\
        --side arcflow=/tmp/arcflow-apiserver-pprof/arcflow-burst-600-* --label pprof-600
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"

# Each place: the functions whose cumulative time answers it (the largest one counts; a name
# that the server's version does not have simply matches nothing).
PLACES: dict[str, tuple[str, ...]] = {
    # The storage calls run in the request's finishing goroutine, not under the verb's handler.
    "create": (r"registry/generic/registry\.\(\*Store\)\.Create$",),
    "update_or_patch": (r"registry/generic/registry\.\(\*Store\)\.Update$",),
    "patch_apply": (r"endpoints/handlers\.\(\*patcher\)\.applyPatch$",),
    "delete": (r"registry/generic/registry\.\(\*Store\)\.Delete$",),
    "get": (r"registry/generic/registry\.\(\*Store\)\.Get$",),
    "list": (r"endpoints/handlers\.ListResource\.func1$",),
    "serve_watches": (r"endpoints/handlers\.handleWatch$",),
    "watch_encode": (r"storage/cacher\.\(\*cachingObject\)\.CacheEncode$",),
    "watch_cache_fanout": (r"storage/cacher\.\(\*Cacher\)\.dispatchEvents$",),
    "crd_schema": (
        r"apiextensions-apiserver/pkg/apiserver\.\(\*unstructuredSchemaCoercer\)\.apply$",
    ),
    "audit_log": (r"plugin/pkg/audit/log\.\(\*backend\)\.ProcessEvents$",),
    "authn_token": (r"bearertoken\.\(\*Authenticator\)\.AuthenticateRequest$",),
    "authn_x509": (r"request/x509\.\(\*Authenticator\)\.AuthenticateRequest$",),
    "authz_rbac": (r"rbac\.\(\*RBACAuthorizer\)\.Authorize$",),
    "gc_background": (r"^runtime\.gcBgMarkWorker$",),
    "tls_read_write": (r"^crypto/tls\.\(\*Conn\)\.(Read|Write)$",),
    "etcd_client": (r"etcd/client/v3\.\(\*kv\)\.Do$",),
}

_LINE = re.compile(r"^\s*\S+\s+\S+%\s+\S+%\s+(\S+)\s+\S+%\s+(.+)$")
_TOTAL = re.compile(r"Total samples = (\S+)")


def _seconds(text: str) -> float:
    """pprof's durations: ``1.68s``, ``600ms``, ``1mins``."""
    for suffix, scale in (("ms", 0.001), ("us", 1e-6), ("mins", 60.0), ("hrs", 3600.0), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def places(profile: Path, go: str) -> dict[str, float]:
    """Total sampled CPU seconds and each place's cumulative seconds in one profile."""
    out = subprocess.run(
        [go, "tool", "pprof", "-top", "-cum", "-nodecount=1000000", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = _TOTAL.search(out)
    cum: dict[str, float] = {}
    for line in out.splitlines():
        match = _LINE.match(line)
        if match:
            cum[match.group(2).strip()] = _seconds(match.group(1))
    result = {"total": _seconds(total.group(1)) if total else 0.0}
    for place, patterns in PLACES.items():
        found = [v for name, v in cum.items() if any(re.search(p, name) for p in patterns)]
        result[place] = round(max(found, default=0.0), 3)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", action="append", required=True, help="name=glob of profiles")
    parser.add_argument("--runners", type=int, default=0, help="runner chains per run")
    parser.add_argument("--label", default="")
    parser.add_argument("--go", default=shutil.which("go") or "go")
    args = parser.parse_args()
    result: dict[str, Any] = {"runners": args.runners, "places": list(PLACES), "sides": {}}
    for side in args.side:
        name, _, pattern = side.partition("=")
        files = sorted(glob.glob(pattern))
        if not files:
            print(f"no profile matches {pattern!r} for side {name}", file=sys.stderr)
            return 2
        runs = [{"file": f, **places(Path(f), args.go)} for f in files]
        medians = {k: round(statistics.median(r[k] for r in runs), 3) for k in ("total", *PLACES)}
        spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in ("total", *PLACES)}
        result["sides"][name] = {"runs": runs, "median_seconds": medians, "spread_seconds": spread}
    width = max(len(p) for p in ("total", *PLACES))
    names = list(result["sides"])
    print(f"{'place':<{width}}  " + "  ".join(f"{n:>22}" for n in names))
    for place in ("total", *PLACES):
        cells = []
        for n in names:
            median = result["sides"][n]["median_seconds"][place]
            low, high = result["sides"][n]["spread_seconds"][place]
            per = f" {median / args.runners * 1000:5.1f}ms" if args.runners else ""
            cells.append(f"{median:6.2f}s [{low:.2f}-{high:.2f}]{per}")
        print(f"{place:<{width}}  " + "  ".join(f"{c:>22}" for c in cells))
    if args.label:
        path = RESULTS / f"apiserver-profile-{args.label}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
