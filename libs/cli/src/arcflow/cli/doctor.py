"""``arcflow doctor``: what is stuck, per set and variant, since when, why, and what to do.

Reads the cluster (AutoscalingRunnerSets, their runner sets, runners, runner pods, listeners
and listener pods, and the reconciler's ``RunnerPodRefused`` Events: one LIST each) and, when
NATS is reachable, GitHub's view of each set through the registrar's ``scale-sets`` RPC and
the dead letters of the last hour. The
conclusions are :mod:`arcflow.cli.doctor_rules` (pure). It finds a running ``arcflow dev`` as
``arcflow audit`` does (its connection file names the kubeconfig and NATS); ``--kubeconfig``
and ``--nats-url`` point it anywhere else. Exit 0: healthy; 1: something is stuck; 2: it could
not read the cluster (ADR 0064).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import click
import nats
from nats.js.api import DeliverPolicy

from arcflow.common.builders import decode_scale_set_ids
from arcflow.common.constants import (
    ANNOTATION_SCALE_SET_ID,
    ANNOTATION_SCALE_SET_IDS,
    LABEL_EPHEMERAL_RUNNER,
)
from arcflow.common.events import DeadLetter as DeadLetterEvent
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    EVENT,
    POD,
    ForbiddenError,
    KubeClient,
    KubeSettings,
)
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.nats import NatsSettings
from arcflow.common.rpc.registrar import RegistrarRpcClient, RegistrarRpcError
from arcflow.common.service.client import nats_client
from arcflow.common.subjects import parse_subject
from arcflow.devstack import connection_file

from .audit import AUDIT_NATS_IDENTITY, AuditReader, AuditRequest, KeyFilter, plan_sources
from .audit_connection import ErrorRecorder, resolve_nats_url
from .doctor_rules import (
    REASON_POD_REFUSED,
    DeadLetter,
    ScaleSetOnGitHub,
    SetInfo,
    Snapshot,
    diagnose,
    render_human,
    render_json,
)

#: How long one RPC to the registrar may take (it asks GitHub once per scale set).
RPC_TIMEOUT_SECONDS: Final = 10.0
DEAD_LETTER_WINDOW: Final = timedelta(hours=1)


@dataclass
class Sources:
    kubeconfig: str | None
    nats_url: str | None
    notes: list[str] = field(default_factory=list)


def resolve_sources(kubeconfig: str | None, nats_url: str | None) -> Sources:
    """``--kubeconfig``, else ``$KUBECONFIG``, else a running ``arcflow dev``'s file, else
    kubectl's default; NATS as ``arcflow audit`` finds it (none: GitHub's view and dead
    letters are left out, and a note says so)."""
    notes: list[str] = []
    values = connection_file.read(connection_file.default_path()) or {}
    dev = values if values and not connection_file.stale(values) else {}
    if not kubeconfig and not os.environ.get("KUBECONFIG") and dev.get(connection_file.KUBECONFIG):
        kubeconfig = dev[connection_file.KUBECONFIG]
        notes.append(f"cluster of the running arcflow dev ({kubeconfig})")
    resolved = resolve_nats_url(nats_url)
    url = resolved.url or os.environ.get(connection_file.NATS_URL)
    return Sources(kubeconfig, url, notes)


def parse_set(doc: dict[str, Any]) -> SetInfo:
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    try:
        ars = AutoscalingRunnerSet.from_manifest(doc)
    except ValueError as exc:
        return SetInfo(doc, (), {}, parse_error=str(exc).splitlines()[0][:300])
    variants = tuple(v.name for v in ars.spec.effective_variants())
    ids: dict[str, int] = {}
    raw_map = annotations.get(ANNOTATION_SCALE_SET_IDS)
    if raw_map:
        try:
            ids = dict(decode_scale_set_ids(raw_map))
        except ValueError:
            ids = {}
    elif variants and str(annotations.get(ANNOTATION_SCALE_SET_ID) or "").isdigit():
        value = int(annotations[ANNOTATION_SCALE_SET_ID])
        if value > 0:
            ids = {variants[0]: value}
    return SetInfo(doc, variants, {v: i for v, i in ids.items() if v in variants})


async def read_cluster(kube: KubeClient, namespace: str | None) -> Snapshot:
    sets, runner_sets, runners, runner_pods, listeners, refusals = await asyncio.gather(
        kube.list(AUTOSCALING_RUNNER_SET, namespace=namespace),
        kube.list(EPHEMERAL_RUNNER_SET, namespace=namespace),
        kube.list(EPHEMERAL_RUNNER, namespace=namespace),
        kube.list(POD, namespace=namespace, label_selector={LABEL_EPHEMERAL_RUNNER: "True"}),
        kube.list(AUTOSCALING_LISTENER, namespace=None),
        _pod_refusals(kube, namespace),
    )
    listener_namespaces = sorted(
        {str((al.get("metadata") or {}).get("namespace") or "") for al in listeners.items}
    )
    listener_pods: list[dict[str, Any]] = []
    for ns in listener_namespaces:
        listed = await kube.list(POD, namespace=ns)
        names = {
            (al.get("metadata") or {}).get("name")
            for al in listeners.items
            if (al.get("metadata") or {}).get("namespace") == ns
        }
        listener_pods += [p for p in listed.items if (p.get("metadata") or {}).get("name") in names]
    return Snapshot(
        now=datetime.now(UTC),
        sets=[parse_set(doc) for doc in sets.items],
        runner_sets=runner_sets.items,
        runners=runners.items,
        runner_pods=runner_pods.items,
        listeners=listeners.items,
        listener_pods=listener_pods,
        pod_refusals=refusals,
    )


async def _pod_refusals(kube: KubeClient, namespace: str | None) -> list[dict[str, Any]]:
    """The reconciler's ``RunnerPodRefused`` Events (the API server's message on a runner
    whose pod it refused); none when this identity may not list Events."""
    try:
        listed = await kube.list(
            EVENT, namespace=namespace, field_selector=f"reason={REASON_POD_REFUSED}"
        )
    except ForbiddenError:
        return []
    return listed.items


async def read_nats(snap: Snapshot, url: str | None, notes: list[str]) -> None:
    """GitHub's view of every set (registrar RPC) and the last hour's dead letters."""
    overrides: dict[str, Any] = {"name": "arcflow-doctor"}
    if url:
        overrides["url"] = url
    settings = NatsSettings(**overrides)
    errors = ErrorRecorder()
    try:
        async with nats_client(
            settings,
            AUDIT_NATS_IDENTITY,
            quiet=True,
            on_error=errors.callback,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.2,
        ) as nc:
            await _github_view(snap, nc, notes)
            await _dead_letters(snap, nc, notes)
    except (OSError, nats.errors.Error) as exc:
        reason = errors.last or exc
        notes.append(
            f"NATS at {settings.url} not reachable ({type(reason).__name__}): GitHub's view "
            "and dead letters not checked"
        )


async def _github_view(snap: Snapshot, nc: Any, notes: list[str]) -> None:
    client = RegistrarRpcClient(nc, timeout=RPC_TIMEOUT_SECONDS)
    records: dict[tuple[str, str, str], int] = {}
    asked = 0
    for info in snap.sets:
        if info.parse_error or (info.manifest.get("metadata") or {}).get("deletionTimestamp"):
            continue
        try:
            views = await client.scale_sets(info.namespace, info.name)
        except RegistrarRpcError as exc:
            notes.append(f"{info.namespace}/{info.name}: GitHub's view unavailable: {exc}")
            continue
        asked += 1
        snap.github = {
            **snap.github,
            (info.namespace, info.name): [
                ScaleSetOnGitHub(
                    v.variant, v.scale_set_id, v.exists, v.assigned_jobs, v.running_jobs
                )
                for v in views
            ],
        }
        for view in views:
            records[(info.namespace, info.name, view.variant)] = view.scale_set_id
    if asked:
        snap.records = records


async def _dead_letters(snap: Snapshot, nc: Any, notes: list[str]) -> None:
    request = AuditRequest(
        sources=plan_sources("dlq", KeyFilter()),
        deliver_policy=DeliverPolicy.BY_START_TIME,
        start_time=snap.now - DEAD_LETTER_WINDOW,
    )
    letters: list[DeadLetter] = []

    def emit(item: Any) -> None:
        event = item.event
        if not isinstance(event, DeadLetterEvent):
            return
        try:
            keys = parse_subject(event.original_subject)
            namespace, ars = keys.namespace or "", keys.ars or keys.name or ""
        except ValueError:
            namespace = ars = ""
        letters.append(
            DeadLetter(event.original_subject, event.reason, event.occurred_at, namespace, ars)
        )

    try:
        await AuditReader(nc, request, emit, lambda _line: None).run()
    except nats.js.errors.NotFoundError:
        notes.append("no dead-letter stream on NATS yet")
        return
    snap.dead_letters = letters


async def run_doctor(
    kubeconfig: str | None, nats_url: str | None, namespace: str | None, use_nats: bool
) -> tuple[Snapshot, list[str]]:
    sources = resolve_sources(kubeconfig, nats_url)
    notes = list(sources.notes)
    kube = await KubeClient.from_settings(KubeSettings(kubeconfig=sources.kubeconfig))
    try:
        snap = await read_cluster(kube, namespace)
    finally:
        await kube.close()
    if use_nats:
        await read_nats(snap, sources.nats_url, notes)
    return snap, notes


def render(snap: Snapshot, notes: Sequence[str], output: str) -> tuple[str, bool]:
    findings = diagnose(snap)
    if output == "json":
        return json.dumps(render_json(snap, findings, notes), indent=2), not findings
    return render_human(snap, findings, notes), not findings


@click.command("doctor")
@click.option("--kubeconfig", default=None, help="kubeconfig of the cluster (default: found)")
@click.option("--nats-url", default=None, help="NATS URL (default: as arcflow audit finds it)")
@click.option("--namespace", "-n", default=None, help="only this namespace")
@click.option("--no-nats", is_flag=True, help="read the cluster only")
@click.option("-o", "--output", type=click.Choice(["human", "json"]), default="human")
def doctor_command(
    kubeconfig: str | None, nats_url: str | None, namespace: str | None, no_nats: bool, output: str
) -> None:
    """Print what is stuck per set and variant, since when, why, and the one thing to do.

    Exit 0 when healthy, 1 when something is stuck, 2 when the cluster cannot be read."""
    try:
        snap, notes = asyncio.run(run_doctor(kubeconfig, nats_url, namespace, not no_nats))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        click.echo(
            f"arcflow doctor: cannot read the cluster: {type(exc).__name__}: {exc}", err=True
        )
        raise SystemExit(2) from None
    text, healthy = render(snap, notes, output)
    click.echo(text)
    raise SystemExit(0 if healthy else 1)


__all__ = ["doctor_command", "parse_set", "read_cluster", "render", "run_doctor"]
