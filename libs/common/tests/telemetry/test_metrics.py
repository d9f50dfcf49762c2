"""The Prometheus endpoint serves OpenTelemetry instruments over real HTTP."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client import REGISTRY

from arcflow.common.telemetry import setup_metrics


@pytest.mark.integration
def test_metrics_endpoint_is_scraped_over_http() -> None:
    server = setup_metrics("arc-test", host="127.0.0.1", port=0)
    try:
        assert server.port > 0
        jobs = server.meter.create_counter("arc_jobs_assigned")
        desired = server.meter.create_gauge("arc_desired_runners")
        # A second "recorder" on the same provider shares the instrument (sync gauge).
        other = server.provider.get_meter("arcflow.arc-test.recorder2")
        jobs.add(4, {"scale_set": "linux-x64"})
        desired.set(6, {"scale_set": "linux-x64"})
        other.create_gauge("arc_desired_runners").set(4, {"scale_set": "gpu"})
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert response.status == 200
            body = response.read().decode()
    finally:
        server.stop()
    assert 'arc_jobs_assigned_total{scale_set="linux-x64"} 4.0' in body
    assert 'arc_desired_runners{scale_set="linux-x64"} 6.0' in body
    assert 'arc_desired_runners{scale_set="gpu"} 4.0' in body
    assert "otel_scope_name" not in body  # scope_info disabled
    assert 'service_name="arc-test"' in body  # target_info carries the service
    # Nothing leaked into prometheus_client's global registry.
    assert REGISTRY.get_sample_value("arc_jobs_assigned_total", {"scale_set": "linux-x64"}) is None
    server.stop()  # idempotent
