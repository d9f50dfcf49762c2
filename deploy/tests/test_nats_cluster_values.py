"""The service charts point arcflow at a NATS cluster: every node's URL and the replica count
of the streams and KV buckets (docs/operations.md "Running on a NATS cluster")."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.tests.helpers import SERVICE_CHARTS, Helm

pytestmark = pytest.mark.integration


def _env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d.get("kind") == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_cluster_urls_and_replicas_reach_the_service(helm: Helm, chart: str) -> None:
    urls = "nats://nats-0.nats:4222,nats://nats-1.nats:4222,nats://nats-2.nats:4222"
    env = _env(helm.render(chart, values={"nats": {"url": urls, "replicas": 3}}))
    assert env["ARCFLOW_NATS_URL"] == urls
    assert env["ARCFLOW_NATS_REPLICAS"] == "3"
    assert _env(helm.render(chart))["ARCFLOW_NATS_REPLICAS"] == "1"


@pytest.mark.parametrize("replicas", [0, 6])
def test_replicas_outside_what_jetstream_keeps_are_refused(helm: Helm, replicas: int) -> None:
    result = helm.template(SERVICE_CHARTS[0], values={"nats": {"replicas": replicas}})
    assert result.returncode != 0
    assert "replicas" in result.stderr
