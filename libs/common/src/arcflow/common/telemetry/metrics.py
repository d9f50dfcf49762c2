"""One Prometheus endpoint per process, fed by OpenTelemetry metrics.

The pattern measured in docs/upstream-behaviour.md#toolchain-notes: one ``MeterProvider`` with one
``PrometheusMetricReader`` on a *private* ``CollectorRegistry`` (tests stay isolated, nothing
lands in prometheus_client's global registry), served by prometheus_client's HTTP server,
``scope_info`` labels disabled. Use synchronous instruments (``create_gauge``): an observable
gauge registered twice under one name is silently dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from threading import Thread
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger(__name__)


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint and the meter that feeds it.

    ``meter`` is the service's default meter; ``provider.get_meter(name)`` gives more.
    ``port`` is the bound port (useful when started with port 0). Call :meth:`stop` once.
    """

    service: str
    host: str
    port: int
    provider: MeterProvider
    registry: CollectorRegistry
    meter: Meter
    _server: Any = field(repr=False)
    _thread: Thread = field(repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """The scrape URL."""
        host = "127.0.0.1" if self.host in {"0.0.0.0", ""} else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        """Shut the HTTP server and the meter provider down (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self.provider.shutdown()


def setup_metrics(
    service: str,
    *,
    host: str = "0.0.0.0",
    port: int = 8080,
    service_version: str = "0.1.0",
) -> MetricsServer:
    """Start the metrics endpoint of ``service`` on ``host:port`` (port 0 picks a free one).

    The provider is *not* installed as the global OTel meter provider: pass the returned
    meter (or provider) explicitly, which keeps several services in one test process apart.
    """
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(scope_info_enabled=False, registry=registry)
    provider = MeterProvider(
        resource=Resource.create({"service.name": service, "service.version": service_version}),
        metric_readers=[reader],
    )
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError:
        provider.shutdown()
        raise
    bound_port = int(server.server_port)
    log.info("metrics endpoint started", extra={"metrics_port": bound_port})
    return MetricsServer(
        service=service,
        host=host,
        port=bound_port,
        provider=provider,
        registry=registry,
        meter=provider.get_meter(f"arcflow.{service}", service_version),
        _server=server,
        _thread=thread,
    )
