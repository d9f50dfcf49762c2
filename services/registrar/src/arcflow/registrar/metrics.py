"""The registrar's metrics (OpenTelemetry instruments, exported by the telemetry helpers)."""

from __future__ import annotations

from opentelemetry.metrics import Meter, NoOpMeter


class RegistrarMetrics:
    """Counters and histograms; attributes are low-cardinality (operation, outcome, kind)."""

    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("arcflow.registrar")
        self.registrations = meter.create_counter(
            "arcflow_registrar_registrations",
            description="Scale sets created, adopted or updated (attribute op)",
        )
        self.deletions = meter.create_counter(
            "arcflow_registrar_deletions", description="Scale sets deleted"
        )
        self.errors = meter.create_counter(
            "arcflow_registrar_errors",
            description="Convergence failures by kind (credentials, upstream, spec_invalid, ...)",
        )
        self.converges = meter.create_counter(
            "arcflow_registrar_converges", description="ARS convergence passes (attribute trigger)"
        )
        self.sweep_settled = meter.create_counter(
            "arcflow_registrar_sweep_settled",
            description="ARSs the periodic sweep found settled and did not enqueue",
        )
        self.converge_duration = meter.create_histogram(
            "arcflow_registrar_converge_duration",
            unit="s",
            description="Duration of one ARS convergence pass",
        )
        self.rpc_requests = meter.create_counter(
            "arcflow_registrar_rpc_requests",
            description="RPC requests by operation and outcome",
        )
        self.rpc_duration = meter.create_histogram(
            "arcflow_registrar_rpc_duration", unit="s", description="RPC handling duration"
        )
