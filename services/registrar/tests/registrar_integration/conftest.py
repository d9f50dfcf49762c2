"""Fixtures of the registrar's end-to-end tests."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer

from .harness import LogCapture, Stack, build_stack


@pytest.fixture
def captured_logs() -> Iterator[LogCapture]:
    handler = LogCapture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


@pytest.fixture
async def stack(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    actions_sim: ActionsSimulator,
    captured_logs: LogCapture,
) -> AsyncIterator[Stack]:
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, actions_sim
    ) as built:
        yield built
