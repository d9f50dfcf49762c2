"""A GitHub server CA that is an issuing intermediate is trusted (partial-chain verification).

A generated root -> intermediate -> server chain; the fake GitHub server of conftest.py serves
the token chain over real TLS on 127.0.0.1 and the Actions client connects to it with httpx.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from arcflow.common.actions import ActionsClient, ActionsError, PatCredentials, RetryPolicy
from arcflow.devstack.actions_sim.tls import Issued, PrivateChain, issue, private_chain

from .conftest import PAT, FakeGitHub, sequence, status

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Chain:
    root: Issued
    intermediate: Issued
    server: Issued
    unrelated: Issued


@pytest.fixture(scope="module")
def chain() -> Chain:
    private = private_chain()
    unrelated = issue("someone else's root", None, ca=True)
    return Chain(private.root, private.intermediate, private.server, unrelated)


@pytest.fixture
async def tls_github(chain: Chain, tmp_path: Path) -> AsyncIterator[FakeGitHub]:
    """The fake GitHub server behind TLS, presenting the server certificate and intermediate."""
    server_context = PrivateChain(chain.root, chain.intermediate, chain.server).server_context()
    fake = FakeGitHub()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.dispatch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context)
    await site.start()
    fake.base_url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield fake
    finally:
        await runner.cleanup()


def _client(fake: FakeGitHub, ca_pem: str) -> ActionsClient:
    return ActionsClient(
        fake.config_url,
        PatCredentials(PAT),
        retry=RetryPolicy.fast(),
        root_ca_pem=ca_pem,
        environ={},
        timeout=10.0,
    )


@pytest.mark.parametrize("anchor", ["intermediate", "root", "intermediate+root"])
async def test_configured_ca_ends_the_chain(
    tls_github: FakeGitHub, chain: Chain, anchor: str
) -> None:
    pems = {"intermediate": chain.intermediate.pem, "root": chain.root.pem}
    ca_pem = "".join(pems[part] for part in anchor.split("+"))
    tls_github.on(
        "GET",
        "_apis/runtime/runnergroups/",
        sequence(status(200, {"count": 1, "value": [{"id": 3, "name": "default"}]})),
    )
    async with _client(tls_github, ca_pem) as client:
        group = await client.get_runner_group_by_name("default")
    assert group.id == 3
    # the whole token chain ran over TLS: registration token, admin connection, service call
    paths = [r.path for r in tls_github.requests]
    assert "/api/v3/actions/runner-registration" in paths
    assert any(path.startswith("/tenant/1/") for path in paths)


async def test_an_unrelated_ca_is_refused(tls_github: FakeGitHub, chain: Chain) -> None:
    async with _client(tls_github, chain.unrelated.pem) as client:
        with pytest.raises(ActionsError) as caught:
            await client.get_runner_group_by_name("default")
    assert "certificate verify failed" in str(caught.value)
    assert tls_github.requests == []  # nothing reached the server


async def test_without_partial_chain_an_intermediate_alone_is_not_enough(
    tls_github: FakeGitHub, chain: Chain
) -> None:
    """What the flag fixes, reproduced with a stock OpenSSL context and plain httpx."""
    stock = ssl.create_default_context(cadata=chain.intermediate.pem)
    async with httpx.AsyncClient(verify=stock) as http:
        with pytest.raises(httpx.ConnectError, match="unable to get issuer certificate"):
            await http.get(f"{tls_github.base_url}/api/v3")
