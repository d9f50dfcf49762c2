"""Listener metrics: upstream's ``gha_*`` names and labels
(docs/upstream-behaviour.md#listener-metrics).

One OpenTelemetry ``MeterProvider`` with a Prometheus reader on a private registry, served on
``metrics_addr`` + ``metrics_endpoint`` by a one-path asyncio endpoint (so the configured path is
the only one that answers). With metrics disabled (empty ``metrics_addr``, the default) nothing
of OpenTelemetry or prometheus_client is imported and recording does nothing.
One :class:`ScaleSetRecorder` per scale set shares the instruments and
stamps its own ``name`` (the ERS name) and ``namespace``. Only synchronous instruments are used:
an observable gauge registered twice under one name is silently dropped
(docs/upstream-behaviour.md#toolchain-notes).

``listenerMetrics`` (the ``metrics`` config key) replaces the default set entirely; unknown
names and names in the wrong section are logged and skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from arcflow.common.events import JobInfo, JobStatistics
from arcflow.common.github_url import InvalidGitHubConfigUrlError, parse_github_config_url
from arcflow.common.stages import (
    LABEL_STAGE,
    LABEL_VARIANT,
    STAGE_BUCKETS,
    STAGE_DESCRIPTION,
    STAGE_LABELS,
    STAGE_METRIC,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, _Gauge
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry

    from arcflow.common.http_endpoint import HttpEndpoint

log = logging.getLogger("arcflow.listener.metrics")

MetricKind = Literal["counter", "gauge", "histogram"]

# Label keys (upstream's metric label names).
LABEL_ENTERPRISE = "enterprise"
LABEL_ORGANIZATION = "organization"
LABEL_REPOSITORY = "repository"
LABEL_NAME = "name"
LABEL_NAMESPACE = "namespace"
LABEL_JOB_NAME = "job_name"
LABEL_JOB_WORKFLOW_REF = "job_workflow_ref"
LABEL_JOB_WORKFLOW_NAME = "job_workflow_name"
LABEL_JOB_WORKFLOW_TARGET = "job_workflow_target"
LABEL_EVENT_NAME = "event_name"
LABEL_JOB_RESULT = "job_result"

SCALE_SET_LABELS = (
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
    LABEL_NAME,
    LABEL_NAMESPACE,
)
JOB_STARTED_LABELS = (
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
    LABEL_JOB_NAME,
    LABEL_EVENT_NAME,
)
JOB_COMPLETED_LABELS = (*JOB_STARTED_LABELS, LABEL_JOB_RESULT)

#: 45 increasing boundaries from 0.01 s to one hour, dense at the short end where job start-up
#: times live (our recollection of upstream's ``defaultRuntimeBuckets``; see docs/listener.md).
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30,
    40, 50, 60, 70, 80, 90, 100, 110, 120, 150, 180, 210, 240, 300, 360, 420, 480,
    540, 600, 900, 1200, 1800, 2400, 3000, 3600,
)  # fmt: skip

GAUGE_AVAILABLE_JOBS = "gha_available_jobs"
GAUGE_ACQUIRED_JOBS = "gha_acquired_jobs"
GAUGE_ASSIGNED_JOBS = "gha_assigned_jobs"
GAUGE_RUNNING_JOBS = "gha_running_jobs"
GAUGE_REGISTERED_RUNNERS = "gha_registered_runners"
GAUGE_BUSY_RUNNERS = "gha_busy_runners"
GAUGE_IDLE_RUNNERS = "gha_idle_runners"
GAUGE_MIN_RUNNERS = "gha_min_runners"
GAUGE_MAX_RUNNERS = "gha_max_runners"
GAUGE_DESIRED_RUNNERS = "gha_desired_runners"
COUNTER_STARTED_JOBS = "gha_started_jobs_total"
COUNTER_COMPLETED_JOBS = "gha_completed_jobs_total"
HISTOGRAM_STARTUP = "gha_job_startup_duration_seconds"
HISTOGRAM_EXECUTION = "gha_job_execution_duration_seconds"
#: Upstream's old listener name (ARC #4431): GitHub's queue time to a runner's start.
HISTOGRAM_QUEUE = "gha_job_queue_duration_seconds"
#: How many assigned jobs' queue times a scale set remembers for their JobStarted.
QUEUE_TIMES_KEPT = 4096
#: arcflow's own, exported only by a standby-mode listener (ADR 0025); not in listenerMetrics.
GAUGE_LEASE_HELD = "arcflow_listener_lease_held"
COUNTER_TAKEOVERS = "arcflow_listener_takeovers_total"
#: Shared capacity (ADR 0062): per scale set its share and its advertised capacity; per
#: budget key (``runners``, ``cpu``, ...) the set's total and what the shares use of it.
GAUGE_CAPACITY_SHARE = "arcflow_listener_capacity_share"
GAUGE_CAPACITY_ADVERTISED = "arcflow_listener_capacity_advertised"
GAUGE_CAPACITY_TOTAL = "arcflow_listener_capacity_total"
GAUGE_CAPACITY_USED = "arcflow_listener_capacity_used"
LABEL_BUDGET_KEY = "budget"
#: arcflow's own, always exported: failed message session creates by ``reason``.
COUNTER_SESSION_FAILURES = "arcflow_listener_session_failures_total"
LABEL_REASON = "reason"
#: arcflow's own, always exported (ADR 0065): 1 while the scale set's message session is open.
GAUGE_SESSION_OPEN = "arcflow_listener_session_open"

_DESCRIPTIONS = {
    GAUGE_AVAILABLE_JOBS: "Number of jobs with matching labels, not yet acquired.",
    GAUGE_ACQUIRED_JOBS: "Number of jobs acquired for this scale set, not yet assigned.",
    STAGE_METRIC: STAGE_DESCRIPTION,
    GAUGE_SESSION_OPEN: "1 while the scale set's GitHub message session is open, else 0.",
    GAUGE_ASSIGNED_JOBS: "Number of jobs assigned to this scale set.",
    GAUGE_RUNNING_JOBS: "Number of jobs running (or about to run).",
    GAUGE_REGISTERED_RUNNERS: "Number of runners registered by the scale set.",
    GAUGE_BUSY_RUNNERS: "Number of registered runners running a job.",
    GAUGE_IDLE_RUNNERS: "Number of registered runners not running a job.",
    GAUGE_MIN_RUNNERS: "Minimum number of runners.",
    GAUGE_MAX_RUNNERS: "Maximum number of runners.",
    GAUGE_DESIRED_RUNNERS: "Number of runners the listener asks for.",
    COUNTER_STARTED_JOBS: "Total number of jobs started.",
    COUNTER_COMPLETED_JOBS: "Total number of jobs completed.",
    HISTOGRAM_STARTUP: "Seconds from the scale set's assignment to the runner's.",
    HISTOGRAM_EXECUTION: "Seconds from the runner's assignment to the job's end.",
    HISTOGRAM_QUEUE: "Seconds from the job's queue time to the runner's assignment (start).",
    GAUGE_LEASE_HELD: "1 while this listener replica holds the scale set's lease, else 0.",
    COUNTER_TAKEOVERS: "Leases this replica took over after the holder's lapsed.",
    COUNTER_SESSION_FAILURES: "Message session creates that failed, by reason "
    "(nil_session_id, conflict, error).",
}

KNOWN_METRICS: dict[str, MetricKind] = {
    GAUGE_AVAILABLE_JOBS: "gauge",
    GAUGE_ACQUIRED_JOBS: "gauge",
    GAUGE_ASSIGNED_JOBS: "gauge",
    GAUGE_RUNNING_JOBS: "gauge",
    GAUGE_REGISTERED_RUNNERS: "gauge",
    GAUGE_BUSY_RUNNERS: "gauge",
    GAUGE_IDLE_RUNNERS: "gauge",
    GAUGE_MIN_RUNNERS: "gauge",
    GAUGE_MAX_RUNNERS: "gauge",
    GAUGE_DESIRED_RUNNERS: "gauge",
    COUNTER_STARTED_JOBS: "counter",
    COUNTER_COMPLETED_JOBS: "counter",
    HISTOGRAM_STARTUP: "histogram",
    HISTOGRAM_EXECUTION: "histogram",
    HISTOGRAM_QUEUE: "histogram",
}
_SECTIONS: dict[str, MetricKind] = {
    "counters": "counter",
    "gauges": "gauge",
    "histograms": "histogram",
}


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: MetricKind
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


def default_metric_specs() -> dict[str, MetricSpec]:
    specs: dict[str, MetricSpec] = {}
    for name, kind in KNOWN_METRICS.items():
        if kind == "gauge":
            specs[name] = MetricSpec(name, kind, SCALE_SET_LABELS)
        elif name in (COUNTER_STARTED_JOBS, HISTOGRAM_STARTUP, HISTOGRAM_QUEUE):
            buckets = DEFAULT_BUCKETS if kind == "histogram" else ()
            specs[name] = MetricSpec(name, kind, JOB_STARTED_LABELS, buckets)
        else:
            buckets = DEFAULT_BUCKETS if kind == "histogram" else ()
            specs[name] = MetricSpec(name, kind, JOB_COMPLETED_LABELS, buckets)
    return specs


def lease_metric_specs() -> dict[str, MetricSpec]:
    """The standby-mode metrics, added to whatever ``listenerMetrics`` selects."""
    return {
        GAUGE_LEASE_HELD: MetricSpec(GAUGE_LEASE_HELD, "gauge", SCALE_SET_LABELS),
        COUNTER_TAKEOVERS: MetricSpec(COUNTER_TAKEOVERS, "counter", SCALE_SET_LABELS),
    }


def capacity_metric_specs() -> dict[str, MetricSpec]:
    """The shared-capacity metrics, added when the set has a capacity (ADR 0062)."""
    keyed = (*SCALE_SET_LABELS, LABEL_BUDGET_KEY)
    return {
        GAUGE_CAPACITY_SHARE: MetricSpec(GAUGE_CAPACITY_SHARE, "gauge", SCALE_SET_LABELS),
        GAUGE_CAPACITY_ADVERTISED: MetricSpec(GAUGE_CAPACITY_ADVERTISED, "gauge", SCALE_SET_LABELS),
        GAUGE_CAPACITY_TOTAL: MetricSpec(GAUGE_CAPACITY_TOTAL, "gauge", keyed),
        GAUGE_CAPACITY_USED: MetricSpec(GAUGE_CAPACITY_USED, "gauge", keyed),
    }


def session_metric_specs() -> dict[str, MetricSpec]:
    """arcflow's session failure counter, added to whatever ``listenerMetrics`` selects."""
    labels = (*SCALE_SET_LABELS, LABEL_REASON)
    return {COUNTER_SESSION_FAILURES: MetricSpec(COUNTER_SESSION_FAILURES, "counter", labels)}


def stage_metric_specs() -> dict[str, MetricSpec]:
    """The runner-stage histogram (ADR 0065), added to whatever ``listenerMetrics`` selects:
    the listener observes the stages that begin or end at one of GitHub's job times."""
    return {
        STAGE_METRIC: MetricSpec(STAGE_METRIC, "histogram", STAGE_LABELS, STAGE_BUCKETS),
        GAUGE_SESSION_OPEN: MetricSpec(GAUGE_SESSION_OPEN, "gauge", SCALE_SET_LABELS),
    }


def metric_specs_from_config(config: Mapping[str, Any] | None) -> dict[str, MetricSpec]:
    """The metrics to export: the defaults when ``config`` is None, else exactly its entries."""
    if config is None:
        return default_metric_specs()
    specs: dict[str, MetricSpec] = {}
    for section, entries in config.items():
        kind = _SECTIONS.get(section)
        if kind is None:
            log.warning("unknown listenerMetrics section %r skipped", section)
            continue
        if not isinstance(entries, Mapping):
            log.warning("listenerMetrics section %r is not a map; skipped", section)
            continue
        for name, entry in entries.items():
            known = KNOWN_METRICS.get(name)
            if known is None:
                log.warning("unknown metric %r in listenerMetrics.%s skipped", name, section)
                continue
            if known != kind:
                log.warning(
                    "metric %r is a %s, not in listenerMetrics.%s; skipped", name, known, section
                )
                continue
            entry = entry if isinstance(entry, Mapping) else {}
            labels = tuple(str(label) for label in entry.get("labels") or ())
            buckets: tuple[float, ...] = ()
            if kind == "histogram":
                raw = entry.get("buckets") or DEFAULT_BUCKETS
                try:
                    buckets = tuple(sorted(float(b) for b in raw))
                except (TypeError, ValueError):
                    log.warning("metric %r has non-numeric buckets; using the defaults", name)
                    buckets = DEFAULT_BUCKETS
            specs[name] = MetricSpec(name, kind, labels, buckets)
    return specs


def parse_metrics_addr(addr: str) -> tuple[str, int]:
    """Go-style ``host:port`` (``:8080`` = every interface) to ``(host, port)``."""
    host, sep, port_text = addr.rpartition(":")
    if not sep:
        raise ValueError(f"metrics address {addr!r} must be host:port")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"metrics address {addr!r} has no numeric port") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"metrics address {addr!r} has an out-of-range port")
    return host.strip("[]") or "0.0.0.0", port


def scale_set_labels_for(configure_url: str, ers_name: str, namespace: str) -> dict[str, str]:
    """enterprise/organization/repository from the config URL, plus name and namespace."""
    try:
        github = parse_github_config_url(configure_url)
        enterprise, org, repo = github.enterprise, github.organization, github.repository
    except InvalidGitHubConfigUrlError:
        enterprise = org = repo = ""
    return {
        LABEL_ENTERPRISE: enterprise,
        LABEL_ORGANIZATION: org,
        LABEL_REPOSITORY: repo,
        LABEL_NAME: ers_name,
        LABEL_NAMESPACE: namespace,
    }


def parse_workflow_ref(ref: str) -> tuple[str, str]:
    """``owner/repo/.github/workflows/ci.yml@refs/heads/main`` -> ``("ci", "heads/main")``.

    Upstream's form (docs/listener.md, "Metrics"): the target is the ref without ``refs/``
    (``heads/main``, ``tags/v1.0.0``), pull refs become ``pull/<n>``; a ref without ``@``
    gives an empty name and target.
    """
    path, at, target = ref.rpartition("@")
    if not at:
        return "", ""
    file = path.rsplit("/", 1)[-1]
    name = file.rsplit(".", 1)[0] if "." in file else file
    if target.startswith("refs/pull/"):
        target = "pull/" + target.removeprefix("refs/pull/").split("/", 1)[0]
    else:
        target = target.removeprefix("refs/")
    return name, target


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or start.year <= 1 or end.year <= 1:
        return None
    return float(int((end - start).total_seconds()))


@dataclass
class _Instruments:
    gauges: dict[str, _Gauge] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)


class ListenerMetrics:
    """The process-wide metrics: instruments, the private registry and the HTTP endpoint.

    ``enabled=False`` (no ``metrics_addr``) builds nothing and records nothing.
    """

    def __init__(
        self, specs: Mapping[str, MetricSpec] | None = None, *, enabled: bool = True
    ) -> None:
        self.specs = dict(default_metric_specs() if specs is None else specs)
        self.enabled = enabled
        self._instruments = _Instruments()
        self._endpoint: HttpEndpoint | None = None
        self.registry: CollectorRegistry | None = None
        self.provider: MeterProvider | None = None
        self.port: int | None = None
        self.endpoint = "/metrics"
        if enabled:
            self._build()

    def _build(self) -> None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(scope_info_enabled=False, registry=self.registry)
        self.provider = MeterProvider(
            resource=Resource.create({"service.name": "arcflow-listener"}),
            metric_readers=[reader],
        )
        meter = self.provider.get_meter("arcflow.listener")
        for spec in self.specs.values():
            description = _DESCRIPTIONS.get(spec.name, "")
            if spec.kind == "gauge":
                self._instruments.gauges[spec.name] = meter.create_gauge(
                    spec.name, description=description
                )
            elif spec.kind == "counter":
                self._instruments.counters[spec.name] = meter.create_counter(
                    spec.name, description=description
                )
            else:
                self._instruments.histograms[spec.name] = meter.create_histogram(
                    spec.name,
                    description=description,
                    explicit_bucket_boundaries_advisory=list(spec.buckets or DEFAULT_BUCKETS),
                )

    def recorder_for(
        self, configure_url: str, ers_name: str, namespace: str, *, variant: str = ""
    ) -> ScaleSetRecorder:
        """A recorder stamping this scale set's labels; instruments are shared."""
        labels = scale_set_labels_for(configure_url, ers_name, namespace)
        return ScaleSetRecorder(self, labels, variant=variant)

    def exposition(self) -> bytes:
        if self.registry is None:
            return b""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    async def start(self, addr: str, endpoint: str) -> None:
        """Serve ``endpoint`` on ``addr``; nothing is served when ``addr`` is empty."""
        if not addr or not self.enabled:
            log.info("metrics disabled (no metrics_addr)")
            return
        from prometheus_client import CONTENT_TYPE_LATEST

        host, port = parse_metrics_addr(addr)
        self.endpoint = endpoint or "/metrics"
        if not self.endpoint.startswith("/"):
            self.endpoint = "/" + self.endpoint
        from arcflow.common.http_endpoint import HttpEndpoint, Reply  # metrics on (ADR 0074)

        def scrape(_query: Mapping[str, str]) -> Reply:
            return Reply(200, self.exposition(), CONTENT_TYPE_LATEST)

        server = HttpEndpoint({self.endpoint: scrape})
        await server.start(host, port)
        self._endpoint = server
        self.port = server.port
        log.info("metrics endpoint on %s:%d%s", host, self.port, self.endpoint)

    async def stop(self) -> None:
        server, self._endpoint = self._endpoint, None
        if server is not None:
            await server.stop()
        if self.provider is not None:
            self.provider.shutdown()

    # -- used by recorders ---------------------------------------------------------------
    def _attrs(self, name: str, values: Mapping[str, str]) -> dict[str, str]:
        return {label: values.get(label, "") for label in self.specs[name].labels}

    def set_gauge(self, name: str, value: float, values: Mapping[str, str]) -> None:
        gauge = self._instruments.gauges.get(name)
        if gauge is not None:
            gauge.set(value, self._attrs(name, values))

    def add_counter(self, name: str, values: Mapping[str, str]) -> None:
        counter = self._instruments.counters.get(name)
        if counter is not None:
            counter.add(1, self._attrs(name, values))

    def observe(self, name: str, value: float, values: Mapping[str, str]) -> None:
        histogram = self._instruments.histograms.get(name)
        if histogram is not None:
            histogram.record(value, self._attrs(name, values))


class ScaleSetRecorder:
    """Upstream's ``MetricsRecorder`` for one scale set."""

    def __init__(
        self,
        metrics: ListenerMetrics,
        scale_set_labels: Mapping[str, str],
        *,
        variant: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._metrics = metrics
        self.labels = dict(scale_set_labels)
        self.stage_labels = {**self.labels, LABEL_VARIANT: variant}
        self._clock = clock
        #: job id -> GitHub's queue time, from its JobAssigned (GitHub may leave it out of
        #: JobStarted); bounded, oldest dropped first.
        self._queued: dict[str, datetime] = {}

    def record_static(self, min_runners: int, max_runners: int) -> None:
        self._metrics.set_gauge(GAUGE_SESSION_OPEN, 0, self.labels)  # until its first statistics
        self._metrics.set_gauge(GAUGE_MIN_RUNNERS, min_runners, self.labels)
        self._metrics.set_gauge(GAUGE_MAX_RUNNERS, max_runners, self.labels)

    def record_statistics(self, stats: JobStatistics) -> None:
        m, labels = self._metrics, self.labels
        m.set_gauge(GAUGE_SESSION_OPEN, 1, labels)  # statistics come only from a session
        m.set_gauge(GAUGE_AVAILABLE_JOBS, stats.total_available_jobs, labels)
        m.set_gauge(GAUGE_ACQUIRED_JOBS, stats.total_acquired_jobs, labels)
        m.set_gauge(GAUGE_ASSIGNED_JOBS, stats.total_assigned_jobs, labels)
        m.set_gauge(GAUGE_RUNNING_JOBS, stats.total_running_jobs, labels)
        m.set_gauge(GAUGE_REGISTERED_RUNNERS, stats.total_registered_runners, labels)
        m.set_gauge(GAUGE_BUSY_RUNNERS, stats.total_busy_runners, labels)
        m.set_gauge(GAUGE_IDLE_RUNNERS, stats.total_idle_runners, labels)

    def record_session_closed(self) -> None:
        self._metrics.set_gauge(GAUGE_SESSION_OPEN, 0, self.labels)

    def record_desired(self, desired: int) -> None:
        self._metrics.set_gauge(GAUGE_DESIRED_RUNNERS, desired, self.labels)

    def record_capacity(
        self, share: int, advertised: int, total: Mapping[str, float], used: Mapping[str, float]
    ) -> None:
        m, labels = self._metrics, self.labels
        m.set_gauge(GAUGE_CAPACITY_SHARE, share, labels)
        m.set_gauge(GAUGE_CAPACITY_ADVERTISED, advertised, labels)
        for key, amount in total.items():
            m.set_gauge(GAUGE_CAPACITY_TOTAL, amount, {**labels, LABEL_BUDGET_KEY: key})
        for key, amount in used.items():
            m.set_gauge(GAUGE_CAPACITY_USED, amount, {**labels, LABEL_BUDGET_KEY: key})

    def record_lease(self, held: bool, *, taken_over: bool = False) -> None:
        self._metrics.set_gauge(GAUGE_LEASE_HELD, 1 if held else 0, self.labels)
        if taken_over:
            self._metrics.add_counter(COUNTER_TAKEOVERS, self.labels)

    def record_session_failure(self, reason: str) -> None:
        self._metrics.add_counter(COUNTER_SESSION_FAILURES, {**self.labels, LABEL_REASON: reason})

    def _job_labels(self, job: JobInfo) -> dict[str, str]:
        workflow_name, workflow_target = parse_workflow_ref(job.job_workflow_ref)
        values = dict(self.labels)
        values.update(
            {
                LABEL_ORGANIZATION: job.owner_name,
                LABEL_REPOSITORY: job.repository_name,
                LABEL_JOB_NAME: job.job_display_name,
                LABEL_JOB_WORKFLOW_REF: job.job_workflow_ref,
                LABEL_JOB_WORKFLOW_NAME: workflow_name,
                LABEL_JOB_WORKFLOW_TARGET: workflow_target,
                LABEL_EVENT_NAME: job.event_name,
            }
        )
        return values

    def _stage(self, stage: str, seconds: float | None) -> None:
        if seconds is not None and seconds >= 0:
            self._metrics.observe(STAGE_METRIC, seconds, {**self.stage_labels, LABEL_STAGE: stage})

    def record_job_assigned(self, job: JobInfo, requested_at: float | None = None) -> None:
        """A ``JobAssigned`` whose batch the worker just scaled for: ``queued`` (GitHub's queue
        time to its assignment) and ``scale_requested`` (assignment to ``requested_at``, the
        stamp of the ERS patch that holds the job's runner, where the reconciler's
        ``runner_created`` starts; now when there is none, or it is older than the
        assignment. GitHub's clock against this host's, docs/operations.md#runner-stages)."""
        assigned = _exact(job.scale_set_assign_time)
        self._stage("queued", _between(_exact(job.queue_time), assigned))
        queued_at = job.queue_time
        if job.job_id and queued_at is not None and queued_at.year > 1:
            self._queued[job.job_id] = queued_at
            while len(self._queued) > QUEUE_TIMES_KEPT:
                del self._queued[next(iter(self._queued))]
        if assigned is not None:
            end = self._clock()
            if requested_at is not None and requested_at >= assigned:
                end = requested_at
            self._stage("scale_requested", end - assigned)

    def record_job_started(self, job: JobInfo) -> None:
        """Also ``start_reported``: GitHub's start to now, the runner status patch written."""
        started_at = _exact(job.runner_assign_time)
        if started_at is not None:
            self._stage("start_reported", self._clock() - started_at)
        values = self._job_labels(job)
        self._metrics.add_counter(COUNTER_STARTED_JOBS, values)
        startup = _seconds(job.scale_set_assign_time, job.runner_assign_time)
        if startup is not None:
            self._metrics.observe(HISTOGRAM_STARTUP, startup, values)
        remembered = self._queued.pop(job.job_id, None)
        queued = job.queue_time if _exact(job.queue_time) is not None else remembered
        waited = _seconds(queued, job.runner_assign_time)
        if waited is not None and waited >= 0:
            self._metrics.observe(HISTOGRAM_QUEUE, waited, values)

    def record_job_completed(self, job: JobInfo) -> None:
        """Skipped for a job no runner ever took (zero ``runnerAssignTime``), as upstream."""
        if job.runner_assign_time is None or job.runner_assign_time.year <= 1:
            return
        values = self._job_labels(job)
        values[LABEL_JOB_RESULT] = job.result
        self._metrics.add_counter(COUNTER_COMPLETED_JOBS, values)
        execution = _seconds(job.runner_assign_time, job.finish_time)
        if execution is not None:
            self._metrics.observe(HISTOGRAM_EXECUTION, execution, values)
        finished = _between(_exact(job.runner_assign_time), _exact(job.finish_time))
        self._stage("job_finished", finished)


def _exact(moment: datetime | None) -> float | None:
    """Epoch seconds, sub-second kept (upstream's histograms truncate to whole seconds; the
    stage histogram must add up, so it does not)."""
    if moment is None or moment.year <= 1:
        return None
    return moment.timestamp()


def _between(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start
