"""What every controller shares: its dependencies (the manifest helpers are in :mod:`.manifest`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime
from typing import Any, TypeVar

from arcflow.common.builders import BuildSettings
from arcflow.common.builders.proxy import ProxyCredentials
from arcflow.common.cache import ObjectCache
from arcflow.common.kube import SECRET, KubeClient, NotFoundError, Resource, build_event
from arcflow.common.listener_config import GitHubCredentials
from arcflow.common.models import ProxyConfig, Secret
from arcflow.common.reconcile.manager import KeptEvents
from arcflow.common.rpc.registrar import RegistrarRpcClient
from arcflow.reconciler.audit import Scope, Writer
from arcflow.reconciler.controllers.manifest import (
    FAILURE_BACKOFF_SECONDS,
    Manifest,
)
from arcflow.reconciler.controllers.reaper_rules import Deadlines
from arcflow.reconciler.controllers.runner_claims import OwedRunners
from arcflow.reconciler.listener_sessions import ListenerSessions
from arcflow.reconciler.metrics import ReconcilerMetrics
from arcflow.reconciler.scalesets import ScaleSetIds
from arcflow.reconciler.stages import StageClock

T = TypeVar("T")


def utc_clock() -> datetime:
    return datetime.now(UTC)


@dataclass
class StatusPacer:
    """When this process last wrote a counts-only status (ERS/ARS runner counts), per object:
    such a write goes out at most every ``interval`` seconds; a phase change at once (ADR 0011,
    ADR 0033). Shared by the ARS and runner-set controllers."""

    interval: float = 5.0
    #: (kind, namespace, name) -> monotonic seconds of the last counts-only write.
    written: dict[tuple[str, str, str], float] = dataclass_field(default_factory=dict)

    def wait(self, kind: str, namespace: str, name: str) -> float:
        """Seconds before a counts-only status write for this object may go out (0: now)."""
        last = self.written.get((kind, namespace, name))
        if last is None:
            return 0.0
        return max(0.0, self.interval - (time.monotonic() - last))

    def sent(self, kind: str, namespace: str, name: str) -> None:
        self.written[(kind, namespace, name)] = time.monotonic()


@dataclass
class RunnerSetState:
    """What the runner-set (ERS) controller remembers between its passes, in this process."""

    #: ERS uid -> the last (patchID, replicas) this replica evaluated a scale request for.
    scaled_for: dict[str, tuple[int, int]] = dataclass_field(default_factory=dict)
    #: ERS uid -> what its capacity-short scale request still owes (ADR 0110); the set's
    #: ``arcflow.io/request-owed`` annotation carries it for a restarted or second replica.
    owed: dict[str, OwedRunners] = dataclass_field(default_factory=dict)
    #: ERS uid -> (next name index, end of the block) of this replica's creation lease
    #: (ADR 0033).
    name_blocks: dict[str, tuple[int, int]] = dataclass_field(default_factory=dict)
    #: ERS uid -> runner names this replica claimed but whose create failed (an API error):
    #: the next pass creates them, whether or not its scale request counts as served.
    uncreated: dict[str, set[str]] = dataclass_field(default_factory=dict)
    #: "<namespace>/<ERS>" -> when its last JIT-failure Event went out (monotonic seconds).
    jit_failures_reported: dict[str, float] = dataclass_field(default_factory=dict)
    #: "<namespace>/<ARS>" -> the lock its variants' capacity gate and creates run under
    #: (ADR 0090).
    budget_locks: dict[str, asyncio.Lock] = dataclass_field(default_factory=dict)
    #: (namespace, runner) -> the last pod refusal said in an Event on it (issue 33).
    pod_refusals_reported: dict[tuple[str, str], str] = dataclass_field(default_factory=dict)
    #: (namespace, ARS, variant) -> when its last pod refusal Event went out (monotonic).
    set_refusals_reported: dict[tuple[str, str, str], float] = dataclass_field(default_factory=dict)


@dataclass
class ArsState:
    """What the ARS controller (and the runner reaper, which reads the ARS's deadline
    annotation) remembers between passes, in this process."""

    #: Per ARS (namespace/name): whether the controller namespace was last seen to exist, for
    #: a server whose ARS schema prunes status conditions (the upstream CRDs carry none).
    controller_namespace_seen: dict[str, bool] = dataclass_field(default_factory=dict)
    #: ARS namespace/name -> the status.effectiveMinRunners last written (ADR 0063).
    effective_minimums_written: dict[str, Any] = dataclass_field(default_factory=dict)
    #: (namespace, ARS) -> the resourceVersion whose unusable deadline annotation was
    #: reported in an Event (ADR 0065).
    deadline_errors_reported: dict[tuple[str, str], str] = dataclass_field(default_factory=dict)
    #: ARS namespace/name -> whether its namespace was last seen to have a ResourceQuota
    #: (``capacity.fromResourceQuota``; issue 33).
    quota_found_seen: dict[str, bool] = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class Tuning:
    """The controllers' tunables and test seams, one frozen value of the Context."""

    # Injectable for tests: the wall clock and the pod failure backoff table.
    clock: Callable[[], datetime] = utc_clock
    failure_backoff: tuple[float, ...] = dataclass_field(default=FAILURE_BACKOFF_SECONDS)
    job_running_recheck: float = 30.0
    outdated_backoff_base: float = 60.0
    outdated_backoff_cap: float = 3600.0
    # How many runners of one set are created at once.
    create_concurrency: int = 16
    # A new runner's first status write (registration and phase in one) waits this long for
    # its pod to run before it says Pending (ADR 0032).
    pending_status_delay: float = 5.0
    #: The stuck-pod deadlines when the ARS says nothing (ADR 0065).
    deadlines: Deadlines = dataclass_field(default_factory=Deadlines)
    #: A runner whose job GitHub completed and whose pod still runs this long after is
    #: stopped (ADR 0100; 0: never).
    job_completed_grace: float = 120.0


@dataclass(frozen=True)
class Context:
    """What the controllers share (one per reconciler process, ADR 0071): dependencies and
    tunables, fixed when the process builds it (``state.py``; tests pass other values to the
    constructor, never set them later). The state each controller keeps between passes is
    declared with it (``declared.py``, ADR 0095) and made once by the controller runtime:
    ``states`` holds it, read through :meth:`state` (or the named properties below)."""

    kube: KubeClient
    writer: Writer
    build: BuildSettings
    ids: ScaleSetIds | None
    registrar: RegistrarRpcClient | None
    metrics: ReconcilerMetrics
    instance: str = "reconciler"
    # The watch-fed cache (ADR 0010); ``None`` reads everything from the API server.
    cache: ObjectCache | None = None
    #: Which listener sessions are open now (the listener's sessions bucket, read-only; ADR
    #: 0073); ``None``: the sessions condition follows the events alone.
    listener_sessions: ListenerSessions | None = None
    tuning: Tuning = dataclass_field(default_factory=Tuning)
    #: The controllers' declared state, one object per class (the runtime's ``states``).
    states: Mapping[type, Any] = dataclass_field(default_factory=dict)
    #: The newest registrar and listener events the ARS controller's declaration keeps
    #: (registration and session failures, ADR 0064), kept by the runtime, read here.
    kept: KeptEvents = dataclass_field(default_factory=KeptEvents)

    @property
    def controller_namespace(self) -> str:
        return self.build.controller_namespace

    def state(self, cls: type[T]) -> T:
        """The one object of a state class a controller declares."""
        found: T = self.states[cls]
        return found

    @property
    def ars_state(self) -> ArsState:
        return self.state(ArsState)

    @property
    def runner_set_state(self) -> RunnerSetState:
        return self.state(RunnerSetState)

    @property
    def status_pacer(self) -> StatusPacer:
        """Counts-only status writes, paced per object (ARS and ERS controllers)."""
        return self.state(StatusPacer)

    @property
    def stages(self) -> StageClock:
        """The runner stage breakdown (ADR 0065)."""
        return self.state(StageClock)


async def warn(
    ctx: Context, involved: Manifest, reason: str, message: str, scope: Scope, about: str
) -> None:
    """A Warning Event on ``involved`` (where ``kubectl describe`` looks), in the audit trail
    as ``about``."""
    event = build_event(involved, reason, message, type="Warning", component="arcflow-reconciler")
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, about)


async def get_or_none(
    kube: KubeClient, resource: Resource | str, name: str, namespace: str
) -> Manifest | None:
    """The object, or ``None`` when it does not exist."""
    try:
        return await kube.get(resource, name, namespace)
    except NotFoundError:
        return None


async def read_observed(
    ctx: Context, resource: Resource, name: str, namespace: str
) -> Manifest | None:
    """The primary object of a pass, read-only: the cached object itself for the kinds the
    cache holds (no copy, ADR 0029/0050), else one GET."""
    if ctx.cache is not None and ctx.cache.caches(resource):
        return ctx.cache.get(resource, name, namespace, shared=True)
    return await get_or_none(ctx.kube, resource, name, namespace)


async def read_list(
    ctx: Context,
    resource: Resource,
    namespace: str | None,
    label_selector: Mapping[str, str] | None = None,
) -> list[Manifest]:
    """Objects of a kind: from the cache for the kinds it holds, else a LIST."""
    if ctx.cache is not None and ctx.cache.caches(resource):
        return ctx.cache.list(resource, namespace, label_selector=label_selector)
    listed = await ctx.kube.list(resource, namespace=namespace, label_selector=label_selector)
    return listed.items


class CredentialsError(RuntimeError):
    """The GitHub config Secret is missing or unusable (message names keys, never values)."""


async def read_github_credentials(
    kube: KubeClient, namespace: str, secret_name: str
) -> GitHubCredentials:
    """The credentials the listener's config.json embeds, from the ARS namespace's Secret."""
    try:
        secret = Secret.from_observed(await kube.get(SECRET, secret_name, namespace))
    except NotFoundError:
        raise CredentialsError(f"Secret {namespace}/{secret_name} not found") from None
    data = secret.decoded_data()
    token = data.get("github_token", "")
    app_id = data.get("github_app_id", "")
    if token:
        return GitHubCredentials.model_validate({"github_token": token})
    if app_id:
        raw_installation = data.get("github_app_installation_id", "")
        try:
            installation = int(raw_installation)
        except ValueError:
            raise CredentialsError(
                f"Secret {namespace}/{secret_name}: github_app_installation_id is not an integer"
            ) from None
        return GitHubCredentials.model_validate(
            {
                "github_app_id": app_id,
                "github_app_installation_id": installation,
                "github_app_private_key": data.get("github_app_private_key", ""),
            }
        )
    raise CredentialsError(
        f"Secret {namespace}/{secret_name} has neither github_token nor github_app_id"
    )


async def read_proxy_credentials(
    kube: KubeClient, namespace: str, proxy: ProxyConfig | None
) -> dict[str, ProxyCredentials]:
    """``credentialSecretRef`` name -> username/password, read in the ARS namespace."""
    found: dict[str, ProxyCredentials] = {}
    servers = (proxy.http, proxy.https) if proxy is not None else ()
    for server in servers:
        ref = server.credential_secret_ref if server is not None else ""
        if not ref or ref in found:
            continue
        try:
            secret = Secret.from_observed(await kube.get(SECRET, ref, namespace))
        except NotFoundError:
            raise CredentialsError(f"proxy credential Secret {namespace}/{ref} not found") from None
        data = secret.decoded_data()
        found[ref] = ProxyCredentials.model_validate(
            {"username": data.get("username", ""), "password": data.get("password", "")}
        )
    return found
