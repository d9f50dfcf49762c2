"""``gha_job_queue_duration_seconds`` (ARC #4431) end to end: the listener process over HTTP to
the Actions simulator, the session's real kube-apiserver and a real nats-server. A job waits
in the queue, a runner starts it later, and the listener's own /metrics shows the wait (GitHub's
queue time to the runner's start, whole seconds) beside the stage histogram."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arcflow.listener.app import Listener

from .helpers import ListenerRig, RunningListener, Variant, eventually, ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

VARIANT = Variant("cpu", 0, 5)


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


async def test_the_listener_exports_how_long_a_job_waited_for_its_runner(
    rig: ListenerRig,
) -> None:
    sim = rig.sim
    token, ids = await rig.register([VARIANT])
    config = rig.config(
        token, [VARIANT], ids, metrics_addr="127.0.0.1:0", metrics_endpoint="/metrics"
    )
    listener = Listener(config, options=rig.options())
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(s["session"] is not None for s in snap["scaleSets"]),
        )
        job_id = sim.enqueue_job([VARIANT.label], display_name="compile")
        await sim.wait_for_job_state(job_id, "assigned")
        # A runner comes up: GitHub hands it the job (JobStarted) with its runner assign time.
        _runner, jit = sim.engine.generate_jit_config(ids[VARIANT.name], {"name": "runner-1"})
        sim.connect_runner(jit)
        job = await sim.wait_for_job_state(job_id, "running")

        assert listener.metrics_port is not None
        url = f"http://127.0.0.1:{listener.metrics_port}/metrics"

        async def scraped() -> str:
            async with httpx.AsyncClient() as http:
                return (await http.get(url)).text

        text = await eventually(
            scraped, lambda t: bool(_samples(t, "gha_job_queue_duration_seconds_count"))
        )
    counts = _samples(text, "gha_job_queue_duration_seconds_count")
    assert [value for _, value in counts] == [1.0]
    labels = counts[0][0]
    assert labels["job_name"] == "compile"
    assert labels["organization"] == "example-org"
    sums = _samples(text, "gha_job_queue_duration_seconds_sum")
    assert sums[0][1] >= 0
    assert sums[0][1] == int(sums[0][1])  # whole seconds, as upstream
    assert job["state"] == "running"
    # Beside the stage histogram: the listener's share of the same wait.
    assert _samples(text, "arcflow_runner_stage_seconds_count")
