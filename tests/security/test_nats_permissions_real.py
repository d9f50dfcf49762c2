"""Every service's real NATS operations work with its own generated user; the rest is denied.

The server runs ``render_nats_authorization(default_users())`` exactly as generated (password
placeholders resolved from the server's environment). Allowed operations must succeed with no
permission violation reported; denied ones must be refused by the server (nats-py hands the
``-ERR 'Permissions Violation ...'`` to ``error_cb``; a JetStream publish then gets no PubAck).
"""

from __future__ import annotations

import asyncio

import nats.errors
import pytest
from nats.aio.msg import Msg

from arcflow.cli.audit import AuditRequest, KeyFilter, Received, plan_sources, run_audit
from arcflow.common import subjects
from arcflow.common.events import (
    JobsBatch,
    JobStatistics,
    K8sObjectChanged,
    ObjectWritten,
    ScaleDecision,
    ScaleSetAssigned,
    SessionFailed,
    parse_event,
)
from arcflow.common.nats import (
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    KV_SCALESETS,
    KV_WATCH,
    STREAM_JOBS,
    STREAM_SCALE,
    NatsSettings,
    ensure_bucket,
    ensure_jetstream,
    ensure_stream,
    publish_event,
)
from arcflow.common.nats.permissions import (
    REGISTRAR_ERS_DURABLE,
    REGISTRAR_LOCKS_BUCKET,
    REGISTRAR_RPC_QUEUE,
)
from arcflow.common.rpc.registrar import (
    RPC_QUEUE_GROUP,
    JitConfigRequest,
    JitConfigResult,
    RegistrarRpcClient,
    RegistrarUnavailableError,
    RpcReply,
)
from arcflow.registrar.k8s_changes import CONSUMER_REGISTRAR_ERS
from arcflow.registrar.locks import LOCKS_BUCKET

from .conftest import SecuredNats

pytestmark = pytest.mark.integration

NS, ARS = "perm-ns", "perm-ars"


def _change(name: str, rv: str) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="watcher",
        api_version="actions.github.com/v1alpha1",
        kind="AutoscalingRunnerSet",
        resource="autoscalingrunnersets",
        namespace=NS,
        name=name,
        uid=f"uid-{name}",
        change="ADDED",
        resource_version=rv,
    )


def test_service_owned_names_match_the_registrar() -> None:
    """permissions.py names the registrar's own durable, bucket and queue group (no import)."""
    assert CONSUMER_REGISTRAR_ERS.durable == REGISTRAR_ERS_DURABLE
    assert LOCKS_BUCKET.bucket == REGISTRAR_LOCKS_BUCKET
    assert REGISTRAR_RPC_QUEUE == RPC_QUEUE_GROUP


async def test_wrong_password_is_rejected(secured: SecuredNats) -> None:
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await secured.connect("watcher", password="not-the-password", allow_reconnect=False)


async def test_each_service_does_its_job_with_its_own_user(secured: SecuredNats) -> None:
    # watcher: declare the layout, publish a change, keep a resume point
    watcher = (await secured.connect("watcher")).jetstream()
    await ensure_jetstream(watcher, consumers=())
    ack = await publish_event(
        watcher, subjects.k8s_subject("autoscalingrunnersets", NS, ARS), _change(ARS, "1")
    )
    assert ack is not None
    assert ack.stream == "ARC_K8S"
    resume = await watcher.key_value(KV_WATCH.bucket)
    await resume.put("autoscalingrunnersets", b"1")
    assert (await resume.get("autoscalingrunnersets")).value == b"1"

    # registrar: its layout and durables, consume the change, record, publish, serve the RPC
    registrar_nc = await secured.connect("registrar")
    registrar = registrar_nc.jetstream()
    await ensure_jetstream(registrar, consumers=[CONSUMER_REGISTRAR_ARS, CONSUMER_REGISTRAR_ERS])
    await ensure_bucket(registrar, LOCKS_BUCKET)
    sub = await registrar.pull_subscribe_bind(
        durable=CONSUMER_REGISTRAR_ARS.durable, stream=CONSUMER_REGISTRAR_ARS.stream
    )
    got = await sub.fetch(1, timeout=2)
    assert getattr(parse_event(got[0].data), "name", None) == ARS
    await got[0].ack_sync()
    ers = await registrar.pull_subscribe_bind(
        durable=CONSUMER_REGISTRAR_ERS.durable, stream=CONSUMER_REGISTRAR_ERS.stream
    )
    with pytest.raises(nats.errors.TimeoutError):
        await ers.fetch(1, timeout=0.2)
    records = await registrar.key_value(KV_SCALESETS.bucket)
    await records.put(f"{NS}.{ARS}._", b'{"scale_set_id": 7}')
    watch = await records.watch(f"{NS}.>", ignore_deletes=True)
    entry = await watch.updates(timeout=2)  # type: ignore[no-untyped-call]
    assert entry is not None
    assert entry.key == f"{NS}.{ARS}._"
    await watch.stop()  # type: ignore[no-untyped-call]
    locks = await registrar.key_value(LOCKS_BUCKET.bucket)
    revision = await locks.create(f"{NS}.{ARS}", b"r1")
    await locks.delete(f"{NS}.{ARS}", last=revision)
    assigned = ScaleSetAssigned(
        source="registrar",
        scale_set_id=7,
        scale_set_name=ARS,
        runner_group_id=1,
        runner_group_name="Default",
    )
    await publish_event(registrar, subjects.scalesets_subject(NS, ARS), assigned)

    async def serve(msg: Msg) -> None:
        request = JitConfigRequest.model_validate_json(msg.data)
        result = JitConfigResult(
            runner_id=1,
            runner_name=request.runner_name,
            scale_set_id=request.scale_set_id,
            encoded_jit_config="secret-jit",
        )
        await msg.respond(RpcReply[JitConfigResult].success(result).encode())

    await registrar_nc.subscribe(
        subjects.registrar_rpc_subject("jitconfig"), queue=RPC_QUEUE_GROUP, cb=serve
    )
    await registrar_nc.flush()

    # reconciler: full layout, its durable, the KV read, the RPC, audit events (no consumer
    # on ARC_K8S: its Kubernetes trigger is its own watch, ADR 0069)
    reconciler_nc = await secured.connect("reconciler")
    reconciler = reconciler_nc.jetstream()
    await ensure_jetstream(reconciler, consumers=[CONSUMER_RECONCILER_SCALESETS])
    durable = await reconciler.pull_subscribe_bind(
        durable=CONSUMER_RECONCILER_SCALESETS.durable, stream=CONSUMER_RECONCILER_SCALESETS.stream
    )
    msgs = await durable.fetch(1, timeout=2)
    await msgs[0].ack_sync()
    ids = await reconciler.key_value(KV_SCALESETS.bucket)
    assert (await ids.get(f"{NS}.{ARS}._")).value == b'{"scale_set_id": 7}'
    # its ARS passes read the records from a live watch of the bucket (ADR 0122)
    records_watch = await ids.watchall()
    entry = await records_watch.updates(timeout=2)  # type: ignore[no-untyped-call]
    assert entry is not None
    assert entry.key == f"{NS}.{ARS}._"
    await records_watch.stop()  # type: ignore[no-untyped-call]
    jit = await RegistrarRpcClient(reconciler_nc, timeout=2).generate_jit_config(
        NS, ARS, 7, "runner-1"
    )
    assert jit.encoded_jit_config.get_secret_value() == "secret-jit"
    written = ObjectWritten(
        source="reconciler", action="created", kind="Pod", namespace=NS, name="p", why="test"
    )
    await publish_event(reconciler, subjects.audit_subject(NS, ARS), written)

    # listener: its two streams, a jobs batch stored, a scale decision out and read back, the
    # jobs stream's end (ADR 0104: it consumes nothing)
    listener = (await secured.connect("listener")).jetstream()
    for stream in (STREAM_JOBS, STREAM_SCALE):
        await ensure_stream(listener, stream)
    batch = JobsBatch(source="listener", scale_set_id=7, message_id=1, statistics=JobStatistics())
    stored = await publish_event(listener, subjects.jobs_subject(NS, ARS), batch)
    assert stored is not None
    assert (await listener.stream_info(STREAM_JOBS.name)).state.last_seq >= stored.seq
    decision = ScaleDecision(
        source="listener",
        scale_set_id=7,
        ephemeral_runner_set=ARS,
        desired_replicas=1,
        patch_id=1,
        assigned_jobs=1,
        min_runners=0,
        max_runners=5,
    )
    await publish_event(listener, subjects.scale_subject(NS, ARS), decision)
    last = await listener.get_last_msg(STREAM_SCALE.name, subjects.scale_subject(NS, ARS))
    assert isinstance(parse_event(last.data or b""), ScaleDecision)
    # ... and a session failure on arc.errors for the ARS's condition (ADR 0064, amendment)
    failed = SessionFailed(source="listener", variant="", scale_set_id=7, reason="conflict")
    await publish_event(listener, subjects.errors_subject(NS, ARS), failed)

    # auditor: `arcflow audit` over every stream, with the auditor user
    seen: list[Received] = []
    auditor_settings = NatsSettings(
        url=secured.url,
        user=secured.user("auditor"),
        password=secured.passwords["auditor"],
    )
    request = AuditRequest(sources=plan_sources("all", KeyFilter(namespace=NS)))
    emitted = await run_audit(auditor_settings, request, seen.append, lambda _w: None)
    types = {r.event.type for r in seen}
    assert emitted == len(seen)
    assert {"scaleset.assigned", "jobs.batch", "scale.decision", "object.written"} <= types

    await asyncio.sleep(0.05)  # let any late -ERR arrive
    assert {s: secured.violations(s) for s in secured.errors} == {s: [] for s in secured.errors}


async def test_watcher_cannot_publish_outside_its_domain(secured: SecuredNats) -> None:
    nc = await secured.connect("watcher")
    await ensure_jetstream(nc.jetstream(), consumers=())
    with pytest.raises(nats.errors.TimeoutError):
        await publish_event(
            nc.jetstream(), subjects.scale_subject("x", "x"), _change("x", "1"), timeout=0.5
        )
    assert "arc.scale.x.x._" in await secured.denied("watcher", "arc.scale.x.x._")


async def test_reconciler_watches_the_records_but_cannot_write_them(secured: SecuredNats) -> None:
    """The records watch (ADR 0122) is read-only: a put on the bucket's subject is refused."""
    subject = f"$KV.{KV_SCALESETS.bucket}.{NS}.{ARS}._"
    nc = await secured.connect("reconciler")
    await nc.publish(subject, b'{"scale_set_id": 8}')
    await nc.flush()
    assert subject.lower() in (await secured.denied("reconciler", subject)).lower()


async def test_listener_cannot_publish_changes_nor_call_the_registrar(
    secured: SecuredNats,
) -> None:
    registrar_nc = await secured.connect("registrar")
    requests: list[Msg] = []

    async def record(msg: Msg) -> None:
        requests.append(msg)

    await registrar_nc.subscribe(
        subjects.registrar_rpc_subject("jitconfig"), queue=RPC_QUEUE_GROUP, cb=record
    )
    await registrar_nc.flush()
    listener_nc = await secured.connect("listener")
    await listener_nc.publish(subjects.k8s_subject("pods", "x", "y"), b"{}")
    assert "arc.k8s.pods.x.y" in await secured.denied("listener", "arc.k8s.pods.x.y")
    with pytest.raises(RegistrarUnavailableError):
        await RegistrarRpcClient(listener_nc, timeout=0.5).generate_jit_config("x", "y", 1, "r")
    await secured.denied("listener", "arc.rpc.registrar.jitconfig")
    assert requests == []
    # arc.errors is publish-only for the listener: it cannot read the reconciler's durable.
    pull = "$JS.API.CONSUMER.MSG.NEXT.ARC_ERRORS.reconciler-errors"
    await listener_nc.publish(pull, b"{}")
    assert pull.lower() in (await secured.denied("listener", pull)).lower()


async def test_auditor_is_read_only_and_never_sees_rpc(secured: SecuredNats) -> None:
    auditor = await secured.connect("auditor")
    for subject in (
        subjects.audit_subject("x", "y"),
        subjects.k8s_subject("pods", "x", "y"),
        subjects.registrar_rpc_subject("jitconfig"),
        f"$KV.{KV_SCALESETS.bucket}.x",
        "$JS.API.STREAM.DELETE.ARC_AUDIT",
    ):
        await auditor.publish(subject, b"{}")
        await secured.denied("auditor", subject)
    seen: list[Msg] = []

    async def record(msg: Msg) -> None:
        seen.append(msg)

    await auditor.subscribe("arc.rpc.>", cb=record)
    await secured.denied("auditor", "arc.rpc.>")
    reconciler = await secured.connect("reconciler")
    await reconciler.publish(subjects.registrar_rpc_subject("jitconfig"), b"jit")
    await reconciler.flush()
    await asyncio.sleep(0.05)
    assert seen == []


async def test_registrar_serves_rpc_only_in_its_queue_group(secured: SecuredNats) -> None:
    """A plain (non-queue) subscription to the RPC subjects is refused even for the registrar."""
    registrar = await secured.connect("registrar")
    await registrar.subscribe(subjects.registrar_rpc_subject("get-runner"))
    await secured.denied("registrar", "arc.rpc.registrar.get-runner")
