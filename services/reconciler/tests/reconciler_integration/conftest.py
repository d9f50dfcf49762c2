"""Fixtures of the reconciler's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.kube import KubeClient
from arcflow.devstack.nats_server import NatsServer

from .harness import Stack, build_stack


@pytest.fixture
async def stack(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
) -> AsyncIterator[Stack]:
    async with build_stack(
        private_nats_server.url,
        kube_client,
        kube_namespace,
        controller_namespace=controller_namespace,
    ) as built:
        yield built


@pytest.fixture
def reader() -> InMemoryMetricReader:
    """Collects the reconciler's metrics of a ``counted_stack``."""
    return InMemoryMetricReader()


@pytest.fixture
async def counted_stack(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    reader: InMemoryMetricReader,
) -> AsyncIterator[Stack]:
    """A stack whose reconciler records its metrics into ``reader``."""
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, meter=meter
    ) as built:
        yield built
