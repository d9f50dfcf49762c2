"""No NATS identity can create, update, pull from, ack or delete another identity's consumer.

Every durable is created by its owner with the owner's generated user; then every other
identity (and the read-only auditor) tries each JetStream API call that would let it take the
durable over: re-create it with another filter (all three create subjects nats-server knows),
fetch from it, ack on it, delete it, and create a durable of its own on the stream. Each attempt
must be refused by the real server, and the owner's durable must still have its own filter and
an untouched delivery state afterwards (the world state, not only the error).

The auditor gets only ephemeral consumers: the server itself refuses a durable name or a
consumer name smuggled into the body of an ephemeral create, which this test checks too.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from nats.js.api import ConsumerInfo

from arcflow.common.nats import (
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    STREAMS,
    ConsumerSpec,
    ensure_consumer,
    ensure_stream,
)
from arcflow.common.nats.permissions import SERVICES
from arcflow.registrar.k8s_changes import CONSUMER_REGISTRAR_ERS

from .conftest import SecuredNats

pytestmark = pytest.mark.integration

#: Every durable arcflow runs, with the identity that owns it.
OWNED: list[tuple[str, ConsumerSpec]] = [
    ("registrar", CONSUMER_REGISTRAR_ARS),
    ("registrar", CONSUMER_REGISTRAR_ERS),
    ("reconciler", CONSUMER_RECONCILER_SCALESETS),
]
NEVER_MATCHES = "arc.nothing.ever"


async def _declare_owned(secured: SecuredNats) -> None:
    watcher = (await secured.connect("watcher")).jetstream()
    for spec in STREAMS:
        await ensure_stream(watcher, spec)
    for owner, spec in OWNED:
        await ensure_consumer((await secured.connect(owner)).jetstream(), spec)


async def _info(secured: SecuredNats, owner: str, spec: ConsumerSpec) -> ConsumerInfo:
    js = (await secured.connect(owner)).jetstream()
    return await js.consumer_info(spec.stream, spec.durable)


async def _all_denied(secured: SecuredNats, attacker: str, attempted: list[str]) -> None:
    """Waits until the server has reported a violation for every subject in ``attempted``."""
    missing = set(attempted)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while missing and loop.time() < deadline:
        # nats-py lower-cases the server's error text
        reported = " ".join(secured.violations(attacker)).lower()
        missing = {subject for subject in missing if f'"{subject.lower()}"' not in reported}
        await asyncio.sleep(0.02)
    assert not missing, f"{attacker} was allowed: {sorted(missing)}; reported: {reported[:400]}"


def _hostile_config(spec: ConsumerSpec) -> bytes:
    config = spec.to_config().as_dict()
    config["filter_subject"] = NEVER_MATCHES
    return json.dumps({"stream_name": spec.stream, "config": config}).encode()


@pytest.mark.parametrize("attacker", SERVICES)
async def test_no_identity_can_touch_another_identitys_durable(
    secured: SecuredNats, attacker: str
) -> None:
    await _declare_owned(secured)
    before = {spec.durable: await _info(secured, owner, spec) for owner, spec in OWNED}
    nc = await secured.connect(attacker)
    inbox = nc.new_inbox()
    await nc.subscribe(inbox)
    attempted: list[str] = []

    async def attempt(subject: str, payload: bytes = b"") -> None:
        await nc.publish(subject, payload, reply=inbox)
        attempted.append(subject)

    for owner, spec in OWNED:
        if owner == attacker:
            continue
        api, stream, durable = "$JS.API", spec.stream, spec.durable
        hostile = _hostile_config(spec)
        await attempt(f"{api}.CONSUMER.CREATE.{stream}.{durable}", hostile)
        await attempt(f"{api}.CONSUMER.CREATE.{stream}.{durable}.{NEVER_MATCHES}", hostile)
        await attempt(f"{api}.CONSUMER.DURABLE.CREATE.{stream}.{durable}", hostile)
        await attempt(f"{api}.CONSUMER.MSG.NEXT.{stream}.{durable}", b'{"batch":1}')
        await attempt(f"{api}.CONSUMER.DELETE.{stream}.{durable}")
        await attempt(f"$JS.ACK.{stream}.{durable}.1.1.1.1700000000000000000.0", b"+ACK")
    for stream in STREAMS:  # nobody names a consumer of its own (the listener neither: ADR 0104)
        await attempt(f"$JS.API.CONSUMER.CREATE.{stream.name}.{attacker}-own")
        await attempt(f"$JS.API.CONSUMER.DURABLE.CREATE.{stream.name}.{attacker}-own")
    await nc.flush()
    await _all_denied(secured, attacker, attempted)

    for owner, spec in OWNED:
        after = await _info(secured, owner, spec)
        assert after.config.filter_subject == spec.filter_subject, spec.durable
        assert after.delivered == before[spec.durable].delivered, spec.durable
        assert after.num_waiting == 0, spec.durable


@pytest.mark.parametrize(("owner", "spec"), OWNED, ids=[spec.durable for _, spec in OWNED])
async def test_ephemeral_create_cannot_smuggle_a_durable_name(
    secured: SecuredNats, owner: str, spec: ConsumerSpec
) -> None:
    """The auditor may create ephemeral consumers; naming a durable in the body is refused."""
    await _declare_owned(secured)
    auditor = await secured.connect("auditor")
    for field in ("durable_name", "name"):
        config = spec.to_config().as_dict()
        config["filter_subject"] = NEVER_MATCHES
        config["deliver_subject"] = auditor.new_inbox()
        config["ack_policy"] = "none"
        config.pop("durable_name" if field == "name" else "name", None)
        body = json.dumps({"stream_name": spec.stream, "config": config}).encode()
        reply = await auditor.request(f"$JS.API.CONSUMER.CREATE.{spec.stream}", body, timeout=5)
        answer = json.loads(reply.data)
        assert "error" in answer, (field, answer)
    after = await _info(secured, owner, spec)
    assert after.config.filter_subject == spec.filter_subject
    assert after.config.deliver_subject is None
