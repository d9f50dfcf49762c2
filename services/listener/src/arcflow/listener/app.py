"""The listener's state: per scale set, a GitHub session pump and the decision it feeds.

The service runtime (``arcflow.listener.service``) connects NATS and declares the streams,
then :meth:`Listener.open` builds the clients on that connection, :meth:`Listener.serve` runs
the scale sets until stopped and :meth:`Listener.close` closes the clients.

One scale set or many, each pump (and the decisions it makes in its own task, ADR 0104) is
supervised with capped backoff (ADR 0087), so one failing scale set never stops its siblings.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from arcflow.common.actions import (
    ActionsClient,
    AppCredentials,
    ConflictRetry,
    PatCredentials,
    RetryPolicy,
    SystemInfo,
)
from arcflow.common.kube.client import KubeClient
from arcflow.common.kube.lite import LiteKubeSettings, LiteSettings
from arcflow.common.listener_config import ListenerConfig
from arcflow.common.nats import NatsConnection
from arcflow.common.schedules import utc_now
from arcflow.common.service.connection import DependencyUnavailableError
from arcflow.common.telemetry import setup_tracing
from arcflow.listener.config import (
    ConfigError,
    ScaleSetTarget,
    hostname,
    scale_set_targets,
)
from arcflow.listener.decision import decider_for
from arcflow.listener.decision_event import DECISION_HEARTBEAT
from arcflow.listener.housekeeping import HOUSEKEEPING_EVERY, housekeeping
from arcflow.listener.lease import (
    LeaseConfigError,
    LeaseStore,
    LeaseTiming,
    ReplicaSettings,
    ScaleSetLease,
)
from arcflow.listener.metrics import (
    ListenerMetrics,
    ScaleSetRecorder,
    capacity_metric_specs,
    lease_metric_specs,
    metric_specs_from_config,
    session_metric_specs,
    stage_metric_specs,
)
from arcflow.listener.pump import AfterPublish, SessionPump
from arcflow.listener.sessions import SessionStore
from arcflow.listener.supervisor import Backoff
from arcflow.listener.unit import ScaleSetUnit

if TYPE_CHECKING:
    from arcflow.listener.capacity import CapacityBoard

log = logging.getLogger("arcflow.listener")


@dataclass
class ListenerOptions:
    """Knobs for tests and benchmarks; production uses the defaults."""

    backoff: Backoff = field(default_factory=Backoff)
    retry: RetryPolicy | None = None
    retry_conflict: ConflictRetry | None = None
    host: str | None = None
    kube_settings: LiteSettings | None = None
    nats: NatsConnection | None = None
    environ: Mapping[str, str] | None = None
    #: Per scale set id: awaited right after the PubAck, before GitHub's ack (crash tests).
    after_publish: dict[int, AfterPublish] = field(default_factory=dict)
    shutdown_timeout: float = 15.0
    #: Standby mode (ADR 0025); None reads ``ARCFLOW_LISTENER_REPLICAS``/``_REPLICA``.
    replicas: ReplicaSettings | None = None
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    #: ADR 0061: an idle ``scale.decision`` that changes nothing, at most this often per set
    #: (``ARCFLOW_LISTENER_DECISION_HEARTBEAT_SECONDS``; None: that variable or 300 s).
    decision_heartbeat: float | None = None
    #: The time scheduledOverrides are evaluated at (ADR 0063); tests may move it.
    wall_clock: Callable[[], datetime] = utc_now
    #: ADR 0074: cached source lines are dropped this often.
    housekeeping_every: float = HOUSEKEEPING_EVERY


DECISION_HEARTBEAT_ENV = "ARCFLOW_LISTENER_DECISION_HEARTBEAT_SECONDS"


def decision_heartbeat(options: ListenerOptions) -> float:
    """The options' heartbeat, else ``ARCFLOW_LISTENER_DECISION_HEARTBEAT_SECONDS``, else 300 s;
    :class:`ConfigError` unless it is a positive number."""
    if options.decision_heartbeat is not None:
        value: float | str = options.decision_heartbeat
    else:
        environ = os.environ if options.environ is None else options.environ
        value = environ.get(DECISION_HEARTBEAT_ENV, "").strip() or DECISION_HEARTBEAT
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(
            f"{DECISION_HEARTBEAT_ENV} must be a positive number of seconds, got {value!r}"
        )
    return seconds


def actions_credentials(config: ListenerConfig) -> PatCredentials | AppCredentials:
    creds = config.credentials
    if creds.has_app:
        return AppCredentials(
            creds.github_app_id, creds.github_app_installation_id, creds.github_app_private_key
        )
    return PatCredentials(creds.github_token)


def default_kube_settings(environ: Mapping[str, str]) -> LiteKubeSettings:
    """``ARCFLOW_KUBE_*``; inside a pod with no kubeconfig given, the service account."""
    settings = LiteKubeSettings.from_env(environ)
    if (
        not settings.in_cluster
        and settings.kubeconfig is None
        and environ.get("KUBERNETES_SERVICE_HOST")
        and not environ.get("KUBECONFIG")
    ):
        settings = dataclasses.replace(settings, in_cluster=True)
    return settings


class Listener:
    """Owns the clients and the per-scale-set units; :meth:`run` until ``stop`` is set."""

    def __init__(
        self,
        config: ListenerConfig,
        raw_config: Mapping[str, Any] | None = None,
        options: ListenerOptions | None = None,
    ) -> None:
        self.config = config
        self.raw_config = dict(raw_config or {})
        self.options = options or ListenerOptions()
        self.multi = bool(config.scale_sets)
        self.targets = scale_set_targets(config, self.options.host or hostname())
        try:
            self.replicas = self.options.replicas or ReplicaSettings.from_environ(
                dict(os.environ if self.options.environ is None else self.options.environ)
            )
        except LeaseConfigError as exc:
            raise ConfigError(str(exc)) from None
        specs = metric_specs_from_config(config.metrics)
        specs.update(session_metric_specs())
        if self.replicas.standby:
            specs.update(lease_metric_specs())
        if config.capacity is not None:
            specs.update(capacity_metric_specs())
        specs.update(stage_metric_specs())  # ADR 0065
        self.metrics = ListenerMetrics(specs, enabled=bool(config.metrics_addr))
        #: The set's shared capacity, priorities and drains (ADR 0062); None without them.
        self.capacity_board: CapacityBoard | None = None
        if config.capacity is not None:  # the allocation code only where it runs (ADR 0074)
            from arcflow.listener.capacity import capacity_board_of

            self.capacity_board = capacity_board_of(config, self.targets)
        self.units: list[ScaleSetUnit] = []
        self.leases: dict[int, ScaleSetLease] = {}
        self._js: JetStreamContext | None = None
        self._kube: KubeClient | None = None
        self._client: ActionsClient | None = None
        self._sessions = SessionStore(None)

    @property
    def metrics_port(self) -> int | None:
        return self.metrics.port

    async def _session_store(self, js: JetStreamContext) -> SessionStore:
        try:
            return await SessionStore.open(js)
        except Exception as exc:  # an older NATS layout or permissions: run without it
            log.warning("session records unavailable (%s); continuing without", type(exc).__name__)
            return SessionStore(None)

    @property
    def holder(self) -> str:
        """This replica's name in the leases bucket (two replicas may share a host in tests)."""
        return f"{self.options.host or hostname()}/{self.replicas.replica}"

    def _build_units(
        self,
        client: ActionsClient,
        js: JetStreamContext,
        kube: KubeClient,
        sessions: SessionStore,
        stop: asyncio.Event,
    ) -> list[ScaleSetUnit]:
        return [self.build_unit(t, client, js, kube, sessions, stop) for t in self.targets]

    def build_unit(
        self,
        target: ScaleSetTarget,
        client: ActionsClient,
        js: JetStreamContext,
        kube: KubeClient,
        sessions: SessionStore,
        stop: asyncio.Event,
    ) -> ScaleSetUnit:
        """A fresh pump and decision for ``target`` (standby mode: one per lease acquisition);
        ``stop`` ends its run (a Kubernetes write refused after it is taken as done)."""
        standby = self.replicas.standby
        host = self.holder if standby else self.options.host or hostname()
        recorder = self.recorder(target)
        recorder.record_static(target.min_runners, target.max_runners)
        board = self.capacity_board
        decider = decider_for(
            target,
            js,
            kube,
            recorder=recorder,
            capacity=board,
            stopping=stop,
            heartbeat=decision_heartbeat(self.options),
            wall_clock=self.options.wall_clock,
        )
        pump = SessionPump(
            target,
            client,
            js,
            decider,
            after_publish=self.options.after_publish.get(target.scale_set_id),
            # A 409 is retried by the unit's supervisor, one scale set or many (ADR 0087); a
            # client-level budget only when the options name one.
            retry_conflict=self.options.retry_conflict,
            sessions=sessions,
            host=host,
            lease_held=standby,
            capacity=board,
            on_session_failure=recorder.record_session_failure,
        )
        return ScaleSetUnit(target, pump, decider)

    def recorder(self, target: ScaleSetTarget) -> ScaleSetRecorder:
        return self.metrics.recorder_for(
            self.config.configure_url,
            target.ephemeral_runner_set_name,
            target.namespace,
            variant=target.variant,
        )

    async def open(self, nc: NatsClient) -> None:
        """Build the clients the pumps and decisions share, on the service's NATS connection.

        An unusable Kubernetes client configuration is an unavailable dependency (exit 3).
        """
        environ = self.options.environ if self.options.environ is not None else os.environ
        setup_tracing("listener")  # once per process; spans exist so trace ids propagate
        self._js = js = nc.jetstream(timeout=10.0)
        try:
            kube_settings = self.options.kube_settings or default_kube_settings(environ)
            self._kube = await KubeClient.from_settings(
                kube_settings, user_agent="arcflow-listener"
            )
        except Exception as exc:
            raise DependencyUnavailableError(
                f"cannot load Kubernetes client configuration: {exc}"
            ) from None
        self._client = ActionsClient(
            self.config.configure_url,
            actions_credentials(self.config),
            system_info=SystemInfo(
                system="arcflow",
                subsystem="listener",
                scale_set_id=self.targets[0].scale_set_id if len(self.targets) == 1 else 0,
            ),
            retry=self.options.retry,
            root_ca_pem=self.config.server_root_ca or None,
        )
        self._sessions = await self._session_store(js)

    async def start_metrics(self) -> None:
        await self.metrics.start(self.config.metrics_addr, self.config.metrics_endpoint)

    async def close(self) -> None:
        """Close the clients :meth:`open` built."""
        client, self._client = self._client, None
        kube, self._kube = self._kube, None
        if client is not None:
            await client.aclose()
        if kube is not None:
            await kube.close()

    async def serve(self, stop: asyncio.Event) -> None:
        """Run every scale set (or contend for them, standby mode) until ``stop`` is set,
        with the process's :func:`housekeeping` beside them."""
        if self._js is None or self._kube is None or self._client is None:
            raise RuntimeError("Listener.serve before Listener.open")
        keeper = asyncio.ensure_future(housekeeping(stop, every=self.options.housekeeping_every))
        try:
            await self._serve(stop)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _serve(self, stop: asyncio.Event) -> None:
        js, kube, client, sessions = self._js, self._kube, self._client, self._sessions
        if js is None or kube is None or client is None:
            raise RuntimeError("Listener.serve before Listener.open")
        if self.replicas.standby:
            log.info(
                "listener replica %d of %d contending for %d scale set(s)",
                self.replicas.replica,
                self.replicas.replicas,
                len(self.targets),
            )
            from arcflow.listener.standby import run_standby  # standby only (ADR 0074)

            leases = await LeaseStore.open(js)
            await run_standby(
                self,
                stop,
                leases,
                lambda t, inner: self.build_unit(t, client, js, kube, sessions, inner),
            )
            return
        self.units = self._build_units(client, js, kube, sessions, stop)
        log.info(
            "listener serving %d scale set(s) in %s mode",
            len(self.units),
            "multi-set" if self.multi else "single-set",
        )
        # One path whatever the number of scale sets (ADR 0087): each unit's pump is
        # supervised with capped back-off, so an error never ends the process (upstream's
        # single-set listener exits and its pod is recreated at once: #4356, #4656).
        await asyncio.gather(*(u.run_supervised(stop, self.options.backoff) for u in self.units))
