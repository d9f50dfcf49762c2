"""The runner stage breakdown of a benchmark run (ADR 0065, docs/benchmarks/stages.md).

Not a test: scrapes ``arcflow_runner_stage_seconds`` from the run's real endpoints (the
reconciler's and every listener process's) before and after the jobs, and compares the sum of
the stage means from ``queued`` to ``job_started`` with the interval the chain covers, as the
benchmark measured it itself: GitHub's queue time (the in-process simulator's) -> the
benchmark's own EphemeralRunner watch saw a status naming the job. Also, the sum less
``start_reported`` against job queued -> GitHub's runner assign time.
"""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from arcflow.common.stages import (
    REPORTED_AFTER_START,
    STAGE_METRIC,
    STAGE_NAMES,
    TO_JOB_STARTED,
)


def stage_urls(parts: Any) -> list[str]:
    """The reconciler's endpoint and every listener process's (their config.json names it)."""
    urls = [f"http://127.0.0.1:{s.metrics_port}/metrics" for s in parts.services.values()]
    for config in sorted((Path(parts.temp) / "pods").glob("*/config.json")):
        addr = json.loads(config.read_text()).get("metrics_addr") or ""
        if addr:
            urls.append(f"http://{addr}/metrics")
    return urls


def _samples(urls: list[str], metric: str) -> Iterator[Any]:
    """Every sample of the metric families named ``metric...`` at ``urls``; an endpoint that
    does not answer counts as empty."""
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
                text = response.read().decode()
        except OSError:
            continue
        for family in text_string_to_metric_families(text):
            if family.name.startswith(metric):
                yield from family.samples


def histogram_totals(urls: list[str], metric: str, label: str) -> dict[str, tuple[float, float]]:
    """``label``'s value -> (sum, count) of the histogram ``metric``, added over ``urls``."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for sample in _samples(urls, metric):
        value = sample.labels.get(label)
        if not value:
            continue
        if sample.name.endswith("_sum"):
            totals[value][0] += sample.value
        elif sample.name.endswith("_count"):
            totals[value][1] += sample.value
    return {value: (v[0], v[1]) for value, v in totals.items()}


def stage_buckets(parts: Any, stage: str) -> dict[float, float]:
    """Upper bound -> cumulative count of ``stage``'s histogram, added over the endpoints."""
    counts: dict[float, float] = defaultdict(float)
    for sample in _samples(stage_urls(parts), STAGE_METRIC):
        if sample.name.endswith("_bucket") and sample.labels.get("stage") == stage:
            counts[float(sample.labels["le"])] += sample.value
    return dict(counts)


def bucket_quantile(
    before: dict[float, float], after: dict[float, float], q: float
) -> float | None:
    """The ``q`` quantile of the observations between two :func:`stage_buckets` scrapes,
    interpolated linearly within its bucket (as Prometheus' ``histogram_quantile``)."""
    bounds = sorted(after)
    cumulative = [after[b] - before.get(b, 0.0) for b in bounds]
    if not cumulative or cumulative[-1] <= 0:
        return None
    rank = q * cumulative[-1]
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 0.0)
        lower, below = bound, count
    return lower


def scrape_stages(parts: Any) -> dict[str, tuple[float, float]]:
    """stage -> (sum of seconds, count), over every variant and endpoint."""
    return histogram_totals(stage_urls(parts), STAGE_METRIC, "stage")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ratio(part: float, whole: float | None) -> float | None:
    return round(part / whole, 4) if whole else None


def breakdown(
    before: dict[str, tuple[float, float]],
    after: dict[str, tuple[float, float]],
    end_to_end: list[float],
    end_to_end_github: list[float] | None = None,
) -> dict[str, Any]:
    """Mean seconds per stage over the run, their sum to ``job_started`` and the ratio of
    that sum to the measured mean of ``end_to_end`` (queued -> runner status names the job);
    the sum less ``start_reported`` against ``end_to_end_github`` (queued -> job started)."""
    means: dict[str, Any] = {}
    for stage in STAGE_NAMES:
        total, count = after.get(stage, (0.0, 0.0))
        total0, count0 = before.get(stage, (0.0, 0.0))
        n = count - count0
        means[stage] = {"n": int(n), "mean": round((total - total0) / n, 4) if n else None}
    summed = sum(means[s]["mean"] or 0.0 for s in TO_JOB_STARTED)
    by_github = summed - (means[REPORTED_AFTER_START]["mean"] or 0.0)
    measured = _mean(end_to_end)
    github = _mean(end_to_end_github or [])
    return {
        "stages": means,
        "sum_of_means_to_job_started": round(summed, 4),
        "sum_to_job_started_by_github": round(by_github, 4),
        "end_to_end_n": len(end_to_end),
        "end_to_end_mean": round(measured, 4) if measured else None,
        "end_to_end_github_mean": round(github, 4) if github else None,
        "ratio": _ratio(summed, measured),
        "ratio_by_github": _ratio(by_github, github),
    }


def scrape_passes(parts: Any) -> dict[str, tuple[float, float]]:
    """The reconciler's passes per kind: kind -> (seconds spent in them, passes), from
    ``arcflow_reconciler_reconcile_duration`` on its endpoint."""
    service = parts.services.get("reconciler")
    if service is None:
        return {}
    url = f"http://127.0.0.1:{service.metrics_port}/metrics"
    return histogram_totals([url], "arcflow_reconciler_reconcile_duration", "kind")


def scrape_rpc(parts: Any) -> dict[str, tuple[float, float]]:
    """The registrar's RPC requests per operation: op -> (seconds spent serving them,
    requests), from ``arcflow_registrar_rpc_duration`` on its endpoint (a JIT config's time
    includes the Actions service's answer)."""
    service = parts.services.get("registrar")
    if service is None:
        return {}
    url = f"http://127.0.0.1:{service.metrics_port}/metrics"
    return histogram_totals([url], "arcflow_registrar_rpc_duration", "op")


def passes_between(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Per kind: passes in the run, the seconds they took in all and on average."""
    out = {}
    for kind, (seconds, count) in sorted(after.items()):
        seconds0, count0 = before.get(kind, (0.0, 0.0))
        n = count - count0
        out[kind] = {
            "passes": int(n),
            "seconds": round(seconds - seconds0, 2),
            "mean": round((seconds - seconds0) / n, 4) if n else 0.0,
        }
    return out
