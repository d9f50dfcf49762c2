"""ADR 0065: the listener's ERS scale patch carries its send time for its patchID, in the same
write; the reconciler's ``runner_created`` starts there, and the listener's
``scale_requested`` ends there, so the patch's way to the reconciler is inside a stage.

Real nats-server, the real kube-apiserver and the real reconciler (the watcher played by the
harness's change events); the decision talks to the server through the fault proxy, which
counts its ERS writes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

from arcflow.common.constants import ANNOTATION_INTEGRITY_HASH
from arcflow.common.events import JobInfo
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.stages import ANNOTATION_SCALE_REQUESTED_AT, STAGE_METRIC, parse_request_stamp
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.devstack.nats_server import NatsServer
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import decider_for
from arcflow.listener.metrics import ListenerMetrics, default_metric_specs, stage_metric_specs
from services.reconciler.tests.reconciler_integration.harness import ars_manifest, build_stack
from tests.polling import eventually

from .helpers import jobs_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def _ers_writes(proxy: KubeFaultProxy) -> int:
    return sum(
        1
        for r in proxy.requests
        if r.method == "PATCH" and r.path.endswith("/ephemeralrunnersets/solo")
    )


def _stage_points(reader: InMemoryMetricReader, stage: str) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    return [
        point
        for resource in (data.resource_metrics if data else [])
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == STAGE_METRIC
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint) and point.attributes.get("stage") == stage
    ]


def _listener_stage_sum(metrics: ListenerMetrics, stage: str) -> float:
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == f"{STAGE_METRIC}_sum" and sample.labels.get("stage") == stage:
                return float(sample.value)
    raise AssertionError(f"no {stage} observed by the listener")


async def test_the_scale_patch_carries_its_stamp_and_the_reconciler_keeps_it(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    kube_proxy: KubeFaultProxy,
    tmp_path: Path,
) -> None:
    settings = KubeSettings(
        kubeconfig=str(kube_proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")),
        qps=1000,
        burst=1000,
    )
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    listener_metrics = ListenerMetrics({**default_metric_specs(), **stage_metric_specs()})
    async with (
        await KubeClient.from_settings(settings) as listener_kube,
        build_stack(private_nats_server.url, kube_client, kube_namespace, meter=meter) as stack,
    ):
        await stack.register("solo", "", 7)
        await stack.apply_ars(ars_manifest(kube_namespace, "solo"))
        await eventually(lambda: stack.list("EphemeralRunnerSet"))
        target = ScaleSetTarget(
            scale_set_id=7,
            namespace=kube_namespace,
            ars="solo",
            variant="",
            ephemeral_runner_set_name="solo",
            min_runners=0,
            max_runners=10,
            owner="listener-pod-1",
        )
        recorder = listener_metrics.recorder_for("https://github.com/octo", "solo", kube_namespace)
        decider = decider_for(target, stack.js, listener_kube, recorder=recorder)
        before_hash = (await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace))[
            "metadata"
        ]["annotations"][ANNOTATION_INTEGRITY_HASH]

        assigned = datetime.fromtimestamp(time.time() - 0.5, UTC)  # GitHub's assign time
        job = JobInfo(
            message_type="JobAssigned",
            job_id="1",
            queue_time=assigned,
            scale_set_assign_time=assigned,
        )
        writes = _ers_writes(kube_proxy)
        sent_after = time.time()
        await decider.batch(jobs_batch(target, "session-1", 1, 1, job))
        returned = time.time()

        # One write: the scale request and its stamp together.
        assert _ers_writes(kube_proxy) == writes + 1
        ers = await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace)
        stamp = parse_request_stamp(ers["metadata"]["annotations"][ANNOTATION_SCALE_REQUESTED_AT])
        assert stamp is not None
        assert stamp[0] == ers["spec"].get("patchID", 0) == 0  # the first request is patchID 0
        assert sent_after - 0.001 <= stamp[1] <= returned
        # The listener's scale_requested ends at the stamp.
        scale_requested = _listener_stage_sum(listener_metrics, "scale_requested")
        assert scale_requested == pytest.approx(stamp[1] - assigned.timestamp(), abs=1e-6)

        async def one_runner() -> list[dict[str, Any]] | None:
            runners = await stack.list("EphemeralRunner")
            return runners if len(runners) == 1 else None

        runner = (await eventually(one_runner))[0]
        points = await eventually(lambda: _ready(_stage_points(reader, "runner_created")))
        observed = time.time()
        assert sum(p.count for p in points) == 1
        # runner_created starts at the stamp and ends when the create answered: after the
        # patch was sent, before the observation was read.
        created = stamp[1] + sum(p.sum for p in points)
        assert sent_after - 0.001 <= created <= observed

        # Not a direct edit of the runner spec, and the reconciler's own ERS writes keep it.
        await stack.app.resync()  # a pass of the ARS and of its ERS again
        await stack.wait_idle()
        ers = await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace)
        annotations = ers["metadata"]["annotations"]
        assert parse_request_stamp(annotations[ANNOTATION_SCALE_REQUESTED_AT]) == stamp
        assert annotations[ANNOTATION_INTEGRITY_HASH] == before_hash
        names = [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")]
        assert names == [runner["metadata"]["name"]], "the runner was replaced"
        assert not await stack.events("RunnerSpecEdited")


async def _ready(value: Any) -> Any:
    return value or None
