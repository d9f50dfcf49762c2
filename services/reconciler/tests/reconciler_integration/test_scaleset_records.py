"""An ARS pass reads the registrar's scale set records from a live watch of the bucket
(ADR 0122): a settled ARS's resync reads nothing from NATS; the registrar's event sends the next
pass to the bucket (the watch may be one delivery behind the write the event announces); a
record changed with no event (a registrar that died between its write and its event) still
reaches the ARS from the watch. Real nats-server and kube-apiserver."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.constants import ANNOTATION_SCALE_SET_ID
from tests.metrics import metric_total
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

READS = "arcflow_reconciler_scaleset_record_reads"


async def test_resync_reads_the_watch_and_the_registrars_event_reads_the_bucket(
    counted_stack: Stack, reader: InMemoryMetricReader
) -> None:
    stack = counted_stack

    def reads(source: str) -> int:
        return metric_total(reader, READS, source=source)

    async def annotated(scale_set_id: int) -> None:
        async def done() -> bool:
            ars = await stack.kube.get("AutoscalingRunnerSet", "recs", stack.namespace)
            found = (ars["metadata"].get("annotations") or {}).get(ANNOTATION_SCALE_SET_ID)
            assert found == str(scale_set_id), f"scale set id annotation {found}"
            return True

        await eventually(done, what=f"the ARS annotated with scale set {scale_set_id}")

    async def resync_reads_only_the_watch() -> bool:
        bucket, watch = reads("bucket"), reads("watch")
        await stack.app.resync()
        await stack.wait_idle()
        assert reads("bucket") == bucket, "a resync pass read the bucket"
        assert reads("watch") > watch, "the resync's ARS pass read no record"
        return True

    await stack.register("recs", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "recs"))
    await annotated(7)
    await stack.wait_idle()
    for _ in range(3):  # settled: every resync's ARS pass is answered from memory
        await eventually(resync_reads_only_the_watch, what="a resync that reads only the watch")

    # The registrar's order: the record, then its event. The event's pass reads the bucket.
    bucket = reads("bucket")
    await stack.put_record("recs", "", 8)
    await stack.announce("recs", 8)
    await annotated(8)
    await stack.wait_idle()
    assert reads("bucket") > bucket, "the event's pass did not read the bucket"
    # once a read found the watch caught up, resyncs read the watch again
    await eventually(resync_reads_only_the_watch, what="a resync that reads only the watch")

    # A record written with no event: the watch delivers it and the next resync applies it.
    await stack.register("recs", "", 9)
    await eventually(resync_reads_only_the_watch, what="a resync that reads only the watch")
    await annotated(9)
