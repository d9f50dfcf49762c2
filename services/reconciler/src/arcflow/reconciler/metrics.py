"""The reconciler's metrics: upstream's ``gha_controller_*`` gauges plus reconcile telemetry.

Instruments are OpenTelemetry (exported on the service's Prometheus endpoint by
``arcflow.common.telemetry.setup_metrics``); attributes are low-cardinality except the
upstream gauges, which carry upstream's labels (name, namespace, repository, organization,
enterprise).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.metrics import Meter, NoOpMeter

from arcflow.common.constants import (
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
)
from arcflow.common.stages import STAGE_BUCKETS, STAGE_DESCRIPTION, STAGE_METRIC


def upstream_labels(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, str]:
    """Upstream's controller metric labels for an object with ARS-derived labels."""
    return {
        "name": name,
        "namespace": namespace,
        "repository": labels.get(LABEL_REPOSITORY, ""),
        "organization": labels.get(LABEL_ORGANIZATION, ""),
        "enterprise": labels.get(LABEL_ENTERPRISE, ""),
    }


class ReconcilerMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("arcflow.reconciler")
        self.pending_runners = meter.create_gauge(
            "gha_controller_pending_ephemeral_runners",
            description="EphemeralRunners pending, per EphemeralRunnerSet",
        )
        self.running_runners = meter.create_gauge(
            "gha_controller_running_ephemeral_runners",
            description="EphemeralRunners running, per EphemeralRunnerSet",
        )
        self.failed_runners = meter.create_gauge(
            "gha_controller_failed_ephemeral_runners",
            description="EphemeralRunners failed, per EphemeralRunnerSet",
        )
        self.running_listeners = meter.create_gauge(
            "gha_controller_running_listeners",
            description="1 when the listener pod of an AutoscalingListener runs, else 0",
        )
        self.reconciles = meter.create_counter(
            "arcflow_reconciler_reconciles", description="Reconcile passes (attribute kind)"
        )
        self.errors = meter.create_counter(
            "arcflow_reconciler_errors", description="Failed reconcile passes (attribute kind)"
        )
        self.duration = meter.create_histogram(
            "arcflow_reconciler_reconcile_duration",
            unit="s",
            description="Duration of one reconcile pass (attribute kind)",
        )
        # The runner stage breakdown (ADR 0065; stages.py says which ones and when).
        self.runner_stage = meter.create_histogram(
            STAGE_METRIC,
            description=STAGE_DESCRIPTION,
            explicit_bucket_boundaries_advisory=list(STAGE_BUCKETS),
        )
        # The deadline reaper (ADR 0065): runner pods recreated or removed, by stage.
        self.reaped = meter.create_counter(
            "arcflow_reconciler_runner_pods_reaped",
            description="Runner pods recreated past a stage deadline or on a lost node "
            "(attributes name, namespace, variant, stage, reason)",
        )
        # Slots that were finished but alive, reclaimed (ADR 0100).
        self.slots_reclaimed = meter.create_counter(
            "arcflow_reconciler_slots_reclaimed",
            description="Runners stopped because they could do no more work while their pod "
            "held the slot: alive after their job, or killed for memory (attributes name, "
            "namespace, variant, reason: alive_after_job, oom_killed)",
        )
        self.orphan_scans = meter.create_counter(
            "arcflow_reconciler_orphan_scans",
            description="Orphan scans finished (each lists GitHub's runners once per ARS)",
        )
        self.orphans_removed = meter.create_counter(
            "arcflow_reconciler_orphan_runners_removed",
            description="GitHub runners with no EphemeralRunner behind them removed "
            "(attributes namespace, name)",
        )
        self.scaleset_reads = meter.create_counter(
            "arcflow_reconciler_scaleset_record_reads",
            description="Scale set records read by ARS passes (attribute source: watch, from "
            "the live KV watch; bucket, from the KV bucket itself; ADR 0122)",
        )
        self.writes = meter.create_counter(
            "arcflow_reconciler_writes",
            description="Objects created/patched/deleted (attributes action, kind)",
        )

    def record_runner_counts(
        self, ers_name: str, namespace: str, labels: Mapping[str, str], counts: Mapping[str, int]
    ) -> None:
        attrs = upstream_labels(labels.get(LABEL_SCALE_SET_NAME, ers_name), namespace, labels)
        attrs["name"] = ers_name
        self.pending_runners.set(counts.get("pending", 0), attrs)
        self.running_runners.set(counts.get("running", 0), attrs)
        self.failed_runners.set(counts.get("failed", 0), attrs)

    def record_stage(self, seconds: float, attrs: dict[str, str]) -> None:
        self.runner_stage.record(seconds, attrs)


def variant_labels(ers_name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, str]:
    """Upstream's labels plus ``variant`` (the runner-variant label, "" for the default)."""
    attrs = upstream_labels(ers_name, namespace, labels)
    attrs["variant"] = labels.get(LABEL_RUNNER_VARIANT, "")
    return attrs
