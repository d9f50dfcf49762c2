"""Replies stay with their requester: per-service inbox prefixes under the generated permissions.

The leak this guards against: with nats-py's shared ``_INBOX.`` prefix every user needed
subscribe on ``_INBOX.>``, so any user (the read-only auditor, say) could subscribe there and
read the registrar's reply to the reconciler's JIT-config request. Now each service connects
with ``_INBOX_<service>`` and may subscribe only to its own ``_INBOX_<service>.>``.

The second half connects through each real connection site (watcher, registrar, reconciler,
listener, ``arcflow audit``, a faststream broker) as its restricted user and makes a JetStream
API request: the answer comes back on the inbox, so a site that forgot its identity (and fell
back to ``_INBOX.``) would time out with a permissions violation.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.msg import Msg

from arcflow.cli.audit import AUDIT_NATS_IDENTITY
from arcflow.common import subjects
from arcflow.common.listener_config import ListenerConfig, ScaleSetConfig
from arcflow.common.nats import NatsSettings, jetstream_of, make_broker
from arcflow.common.nats.permissions import SERVICES
from arcflow.common.rpc.registrar import (
    RPC_QUEUE_GROUP,
    JitConfigRequest,
    JitConfigResult,
    RegistrarRpcClient,
    RpcReply,
)
from arcflow.common.service.connection import connect_plain, make_service_broker
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.listener.app import ListenerOptions
from arcflow.listener.service import SERVICE as LISTENER
from arcflow.listener.settings import ListenerSettings
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.registrar.service import SERVICE as REGISTRAR
from arcflow.watcher.service import SERVICE as WATCHER

from .conftest import SecuredNats

pytestmark = pytest.mark.integration

SECRET_JIT = "jit-config-only-for-the-reconciler"
SHARED_INBOX = "_INBOX.>"
RECONCILER_INBOX = "_INBOX_reconciler.>"


async def _refused(secured: SecuredNats, service: str, subject: str, *, exact: bool = True) -> None:
    """Waits until the server reported refusing ``service``'s subscription to ``subject``
    (or, with ``exact=False``, to a subject starting with it)."""
    quoted = (f'"{subject}"' if exact else f'"{subject}').lower()
    for _ in range(200):
        if any(
            "subscription" in v.lower() and quoted in v.lower() for v in secured.violations(service)
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"subscription to {subject!r} was not refused: {secured.errors}")


async def _serve_jit_configs(secured: SecuredNats) -> None:
    """A registrar-user responder for ``jitconfig`` in the registrar's queue group."""
    registrar = await secured.connect("registrar")

    async def serve(msg: Msg) -> None:
        request = JitConfigRequest.model_validate_json(msg.data)
        result = JitConfigResult(
            runner_id=1,
            runner_name=request.runner_name,
            scale_set_id=request.scale_set_id,
            encoded_jit_config=SECRET_JIT,
        )
        await msg.respond(RpcReply[JitConfigResult].success(result).encode())

    await registrar.subscribe(
        subjects.registrar_rpc_subject("jitconfig"), queue=RPC_QUEUE_GROUP, cb=serve
    )
    await registrar.flush()


async def test_the_auditor_cannot_read_a_jit_config_reply(secured: SecuredNats) -> None:
    await _serve_jit_configs(secured)
    auditor = await secured.connect("auditor")
    seen: list[Msg] = []

    async def record(msg: Msg) -> None:
        seen.append(msg)

    for pattern in (SHARED_INBOX, RECONCILER_INBOX):
        await auditor.subscribe(pattern, cb=record)
    await auditor.flush()
    await _refused(secured, "auditor", SHARED_INBOX)
    await _refused(secured, "auditor", RECONCILER_INBOX)

    reconciler = await secured.connect("reconciler")
    jit = await RegistrarRpcClient(reconciler, timeout=2).generate_jit_config(
        "ns", "ars", 7, "runner-1"
    )
    assert jit.encoded_jit_config.get_secret_value() == SECRET_JIT
    await auditor.flush()
    await asyncio.sleep(0.05)  # a leaked reply would have arrived by now
    assert seen == []
    assert secured.violations("reconciler") == []
    assert secured.violations("registrar") == []


@pytest.mark.parametrize("service", [s for s in SERVICES if s != "reconciler"])
async def test_no_other_user_may_subscribe_to_the_reconciler_inbox(
    secured: SecuredNats, service: str
) -> None:
    nc = await secured.connect(service)
    for pattern in (RECONCILER_INBOX, SHARED_INBOX):
        await nc.subscribe(pattern)
    await nc.flush()
    await _refused(secured, service, RECONCILER_INBOX)
    await _refused(secured, service, SHARED_INBOX)


async def test_the_shared_default_inbox_no_longer_works(secured: SecuredNats) -> None:
    """The control: a connection without its identity (nats-py's ``_INBOX.``) gets no answer,
    so the connection-site tests below fail if a site forgets to pass its identity."""
    nc = await secured.connect("auditor", inbox_prefix="_INBOX")
    with pytest.raises(nats.errors.TimeoutError):
        await nc.jetstream(timeout=0.5).account_info()
    await _refused(secured, "auditor", "_INBOX.", exact=False)


# --- every real connection site connects with its own inbox -------------------------------


def _login_env(secured: SecuredNats, service: str) -> dict[str, str]:
    return {
        "ARCFLOW_NATS_URL": secured.url,
        "ARCFLOW_NATS_USER": secured.user(service),
        "ARCFLOW_NATS_PASSWORD": secured.passwords[service],
        "ARCFLOW_NATS_MAX_RECONNECT_ATTEMPTS": "0",
    }


async def _answers_on_its_inbox(nc: Any) -> None:
    try:
        info = await nc.jetstream(timeout=2).account_info()
        assert info is not None
    finally:
        await nc.close()


@pytest.mark.parametrize("spec", [WATCHER, REGISTRAR, RECONCILER], ids=lambda s: s.name)
async def test_service_runtime_connection_site(secured: SecuredNats, spec: Any) -> None:
    """The one connection the service runtime opens (arcflow.common.service.connection): a
    broker's for a service that subscribes, plain nats-py for one that does not (ADR 0045)."""
    settings = secured.settings(spec.name)
    if spec.subscriptions:
        nc = await make_service_broker(settings, spec.name).connect()
    else:
        nc = await connect_plain(settings, spec.name)
    await _answers_on_its_inbox(nc)  # closes the connection


async def test_listener_connection_site_takes_its_identity_from_code(
    secured: SecuredNats,
) -> None:
    """The listener's environment names only the login; the inbox comes from the listener."""
    config = ListenerConfig(
        configure_url="https://github.com/org",
        github_token="t",
        ephemeral_runner_set_namespace="ns",
        runner_scale_set_name="ars",
        scale_sets=[
            ScaleSetConfig(
                runner_scale_set_id=1,
                runner_scale_set_name="ars",
                ephemeral_runner_set_name="ars",
                min_runners=0,
                max_runners=1,
            )
        ],
    )
    options = ListenerOptions(environ=_login_env(secured, "listener"), host="l-0")
    settings = ListenerSettings.resolve(config, options=options)

    async def connected(ctx: Any) -> Any:
        return ctx

    # The listener's runtime up to its state: connects and declares ARC_JOBS/ARC_SCALE/ARC_DLQ,
    # whose replies come back on its inbox (no GitHub session is opened).
    runtime = ServiceRuntime(replace(LISTENER, build=connected, components=None), settings)
    await runtime.start()
    try:
        assert (await runtime.state.js.account_info()) is not None
    finally:
        await runtime.stop()


async def test_audit_and_faststream_connection_sites(secured: SecuredNats) -> None:
    assert AUDIT_NATS_IDENTITY == "auditor"
    settings = secured.settings(AUDIT_NATS_IDENTITY)
    await _answers_on_its_inbox(await nats.connect(**settings.connect_options("auditor")))
    broker = make_broker(settings, "auditor")
    async with broker:
        await broker.connect()
        assert (await jetstream_of(broker).account_info()) is not None


def test_an_explicit_prefix_overrides_the_identity() -> None:
    settings = NatsSettings(inbox_prefix="_INBOX_custom")
    assert settings.connect_options("reconciler")["inbox_prefix"] == "_INBOX_custom"
