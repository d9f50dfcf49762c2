"""Fixtures of the reconciler's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

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
