"""The registrar reaches a GitHub server behind a private CA and a proxy the way the ARS says
(githubServerTLS, proxy): the Actions simulator served over TLS by a generated root ->
intermediate -> server chain, a real CONNECT proxy with Basic authentication. A missing or
unusable CA is reported with its reason and blocks nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.events import RegistrationFailed
from arcflow.common.kube import KubeClient
from arcflow.common.rpc.registrar import RegistrarRpcClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.actions_sim.tls import PrivateChain, private_chain
from arcflow.devstack.nats_server import NatsServer
from tests.connect_proxy import ConnectProxy
from tests.fixtures.actions import TEST_POLL_TIMEOUT
from tests.polling import eventually

from .harness import LogCapture, Stack, all_stored_messages, build_stack
from .test_lifecycle import apply_ars, registered

pytestmark = pytest.mark.integration

PROXY_USER, PROXY_PASSWORD = "proxy-user", "proxy-p@ss:word"


@pytest.fixture(scope="module")
def chain() -> PrivateChain:
    return private_chain()


@pytest.fixture
async def tls_stack(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    chain: PrivateChain,
    captured_logs: LogCapture,
) -> AsyncIterator[Stack]:
    sim = ActionsSimulator(poll_timeout=TEST_POLL_TIMEOUT, ssl_context=chain.server_context())
    async with sim, build_stack(private_nats_server.url, kube_client, kube_namespace, sim) as s:
        yield s


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    running = ConnectProxy(PROXY_USER, PROXY_PASSWORD)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def _config_map(stack: Stack, name: str, data: dict[str, str]) -> None:
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": stack.namespace},
            "data": data,
        }
    )


def _tls(config_map: str) -> dict[str, Any]:
    return {"certificateFrom": {"configMapKeyRef": {"name": config_map, "key": "ca.crt"}}}


async def _failure(stack: Stack, ars: str, text: str) -> bool:
    return any(
        isinstance(e, RegistrationFailed) and subject.endswith(f".{ars}") and text in e.reason
        for subject, e in await stack.stream_events("ARC_ERRORS")
    )


async def test_registers_and_serves_jit_through_the_proxy_trusting_the_intermediate(
    tls_stack: Stack, chain: PrivateChain, proxy: ConnectProxy, captured_logs: LogCapture
) -> None:
    stack = tls_stack
    assert stack.config_url.startswith("https://")
    await stack.create_secret({"github_token": stack.pat})
    await stack.create_secret({"username": PROXY_USER, "password": PROXY_PASSWORD}, "proxy-creds")
    await _config_map(stack, "ghes-ca", {"ca.crt": chain.intermediate.pem})
    await stack.start_registrar()
    proxy_spec = {
        "https": {"url": proxy.url, "credentialSecretRef": "proxy-creds"},
        "noProxy": ["example.com"],
    }
    manifest = stack.ars_manifest("tls", githubServerTLS=_tls("ghes-ca"), proxy=proxy_spec)
    await apply_ars(stack, manifest)

    sets = await eventually(lambda: registered(stack, {"tls"}))
    assert f"127.0.0.1:{stack.sim.port}" in proxy.tunnels
    assert proxy.refused == 0

    # The JIT path (from the registrar's watches) uses the same CA and proxy.
    tunnels = len(proxy.tunnels)
    client = RegistrarRpcClient(stack.nc, timeout=10)
    jit = await client.generate_jit_config(stack.namespace, "tls", sets["tls"]["id"], "tls-r1")
    assert jit.runner_name == "tls-r1"
    assert len(proxy.tunnels) >= tunnels

    stored = b"".join(data for _, _, data in await all_stored_messages(stack.js))
    assert PROXY_PASSWORD.encode() not in stored
    assert PROXY_PASSWORD not in captured_logs.text


async def test_a_missing_or_invalid_ca_is_reported_and_blocks_nothing_else(
    tls_stack: Stack, chain: PrivateChain
) -> None:
    stack = tls_stack
    await stack.create_secret({"github_token": stack.pat})
    await _config_map(stack, "root-ca", {"ca.crt": chain.root.pem})
    await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("noca", githubServerTLS=_tls("later-ca")))
    await apply_ars(stack, stack.ars_manifest("good", githubServerTLS=_tls("root-ca")))

    await eventually(lambda: registered(stack, {"good"}))
    missing = f"ConfigMap {stack.namespace}/later-ca (spec.githubServerTLS) not found"
    await eventually(lambda: _failure(stack, "noca", missing), what="missing CA reported")

    await _config_map(stack, "later-ca", {"ca.crt": "not a certificate"})
    await eventually(
        lambda: _failure(stack, "noca", "is not a PEM certificate bundle"),
        what="invalid CA reported",
    )
    assert set(stack.scale_sets()) == {"good"}

    await stack.kube.patch_merge(
        "ConfigMap", "later-ca", {"data": {"ca.crt": chain.root.pem}}, namespace=stack.namespace
    )
    await eventually(lambda: registered(stack, {"good", "noca"}))  # the sweep retries
