"""A real nats-server running the generated authorization, and clients logged in per service."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from pydantic import SecretStr

from arcflow.common.nats import NatsSettings
from arcflow.common.nats.permissions import (
    SERVICES,
    default_users,
    password_placeholder,
)
from arcflow.devstack.nats_server import NatsServer

#: The file operators deploy (a drift test keeps it equal to the generator's output).
COMMITTED_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nats" / "authorization.conf"


@dataclass
class SecuredNats:
    """The server, each service's real password, and the errors every client reported."""

    server: NatsServer
    passwords: dict[str, str]
    errors: dict[str, list[Exception]] = field(default_factory=dict)
    clients: list[NatsClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def user(self, service: str) -> str:
        return default_users()[service][0]

    def settings(self, service: str) -> NatsSettings:
        """``NatsSettings`` logging in as ``service``'s NATS user (inbox prefix left default)."""
        return NatsSettings(
            url=self.url,
            user=self.user(service),
            password=SecretStr(self.passwords[service]),
            connect_timeout=2,
            max_reconnect_attempts=0,
        )

    async def connect(self, service: str, **options: object) -> NatsClient:
        """A connection as ``service``'s NATS user, built like the services build theirs
        (``NatsSettings.connect_options(service)``: the service's own inbox prefix); async
        errors land in ``errors[service]``. ``options`` override nats-py arguments."""
        errors = self.errors.setdefault(service, [])

        async def on_error(exc: Exception) -> None:
            errors.append(exc)

        kwargs = self.settings(service).connect_options(service)
        kwargs.update(options)
        nc = await nats.connect(error_cb=on_error, **kwargs)
        self.clients.append(nc)
        return nc

    def error_hook(self, service: str) -> Callable[[Exception], Awaitable[None]]:
        """An async-error callback that records into ``errors[service]`` (for a runtime)."""
        errors = self.errors.setdefault(service, [])

        async def on_error(exc: Exception) -> None:
            errors.append(exc)

        return on_error

    def violations(self, service: str) -> list[str]:
        """The permission violations the server reported to ``service``'s clients."""
        return [str(e) for e in self.errors.get(service, []) if "ermissions" in str(e)]

    async def denied(self, service: str, fragment: str) -> str:
        """Waits (2 s at most) until the server reported a violation naming ``fragment`` to
        ``service``; returns it."""
        for _ in range(200):
            found = [v for v in self.violations(service) if fragment.lower() in v.lower()]
            if found:
                return found[0]
            await asyncio.sleep(0.01)
        raise AssertionError(f"no permission violation for {fragment!r}: {self.errors}")


def _start_secured(tmp: Path) -> tuple[NatsServer, dict[str, str]]:
    """The committed config as deployed (env placeholders), passwords given by environment."""
    config = tmp / "authorization.conf"
    config.write_text(COMMITTED_CONFIG.read_text())
    # nats-server parses a variable's value as config: it must not start with "-" or a digit
    # nor contain spaces unless the value itself is double-quoted (docs/deploy.md).
    passwords = {s: f"pw{secrets.token_hex(16)}" for s in SERVICES}
    saved = dict(os.environ)
    try:
        for service, password in passwords.items():
            os.environ[password_placeholder(service).removeprefix("$")] = password
        server = NatsServer(config_file=str(config)).start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return server, passwords


@pytest.fixture(scope="module")
def secured_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[NatsServer, dict[str, str]]]:
    server, passwords = _start_secured(tmp_path_factory.mktemp("nats-auth"))
    try:
        yield server, passwords
    finally:
        server.stop()


@pytest.fixture
async def secured(secured_server: tuple[NatsServer, dict[str, str]]) -> AsyncIterator[SecuredNats]:
    server, passwords = secured_server
    state = SecuredNats(server, passwords)
    try:
        yield state
    finally:
        for nc in state.clients:
            if not nc.is_closed:
                await asyncio.wait_for(nc.close(), timeout=5)
