"""Both ways an ARS's CA and proxy reach an Actions client, over real TLS and a real CONNECT
proxy: the listener's (CA from its config, proxy from the environment its pod gets from the
proxy Secret) and the registrar's (an explicit ServerConnection, which ignores the
environment)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arcflow.common.actions import ActionsClient, ActionsError, PatCredentials, RetryPolicy
from arcflow.common.actions.connection import ServerConnection
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.actions_sim.tls import PrivateChain, private_chain
from tests.connect_proxy import ConnectProxy

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chain() -> PrivateChain:
    return private_chain()


@pytest.fixture
async def tls_sim(chain: PrivateChain) -> AsyncIterator[ActionsSimulator]:
    async with ActionsSimulator(poll_timeout=1.0, ssl_context=chain.server_context()) as sim:
        yield sim


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    running = ConnectProxy("user", "p@ss")
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


def _authenticated(proxy: ConnectProxy) -> str:
    return proxy.url.replace("http://", "http://user:p%40ss@")


async def test_listener_path_ca_from_config_and_proxy_from_environment(
    tls_sim: ActionsSimulator,
    chain: PrivateChain,
    proxy: ConnectProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", _authenticated(proxy))
    async with ActionsClient(
        tls_sim.config_url("org"),
        PatCredentials(tls_sim.add_pat()),
        retry=RetryPolicy.fast(),
        root_ca_pem=chain.intermediate.pem,
    ) as client:
        assert await client.get_runner_scale_set(1, "absent") is None
    assert f"127.0.0.1:{tls_sim.port}" in proxy.tunnels
    assert proxy.refused == 0


async def test_registrar_path_connection_wins_over_the_environment(
    tls_sim: ActionsSimulator,
    chain: PrivateChain,
    proxy: ConnectProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    connection = ServerConnection(root_ca_pem=chain.root.pem, https_proxy=_authenticated(proxy))
    async with ActionsClient(
        tls_sim.config_url("org"),
        PatCredentials(tls_sim.add_pat()),
        retry=RetryPolicy.fast(),
        connection=connection,
    ) as client:
        assert await client.get_runner_scale_set(1, "absent") is None
    assert f"127.0.0.1:{tls_sim.port}" in proxy.tunnels


async def test_a_refused_proxy_login_is_a_clear_error_without_the_password(
    tls_sim: ActionsSimulator, chain: PrivateChain, proxy: ConnectProxy
) -> None:
    wrong = proxy.url.replace("http://", "http://user:n0t-the-pa55@")
    connection = ServerConnection(root_ca_pem=chain.root.pem, https_proxy=wrong)
    async with ActionsClient(
        tls_sim.config_url("org"),
        PatCredentials(tls_sim.add_pat()),
        retry=RetryPolicy.fast(),
        connection=connection,
    ) as client:
        with pytest.raises(ActionsError) as caught:
            await client.get_runner_scale_set(1, "absent")
    assert "n0t-the-pa55" not in str(caught.value)
    assert "n0t-the-pa55" not in repr(caught.value)
    assert proxy.refused >= 1
    assert proxy.tunnels == []
