"""What the registrar's converge controller shares (the registrar's counterpart of the
reconciler's ``Context``, frozen as it is): its reads, the registrations, the Actions clients,
the reporter, the scale sets GitHub deleted, the plan executor, the lease locks, its work queue
and the pass hints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Tracer

from arcflow.common.cache import ObjectCache
from arcflow.common.kube import KubeClient
from arcflow.common.reconcile.keys import Key
from arcflow.common.reconcile.workqueue import WorkQueue
from arcflow.registrar.ars_clients import ArsClients
from arcflow.registrar.ars_reads import ClusterReads
from arcflow.registrar.credentials import ActionsClientCache
from arcflow.registrar.execution import PlanExecutor
from arcflow.registrar.gone import VERIFY_INTERVAL_SECONDS, GoneScaleSets
from arcflow.registrar.hints import Hint, PassHints
from arcflow.registrar.locks import LeaseLocks
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.records import ScaleSetRecords
from arcflow.registrar.reporting import SOURCE, Reporter

#: The kind of the registrar's keys (one controller: AutoscalingRunnerSets).
KIND_ARS = "ars"

ArsKey = Key[str]


def ars_key(namespace: str, name: str) -> ArsKey:
    return Key(KIND_ARS, namespace, name)


@dataclass(frozen=True)
class RegistrarContext:
    """Built once, complete, by the controller runtime's ``make_context`` (ADR 0071, ADR 0095):
    its dependencies and tunables; the work queue is the runtime's and the pass hints are the
    converge controller's declared state."""

    reads: ClusterReads
    records: ScaleSetRecords
    clients: ArsClients
    reporter: Reporter
    gone: GoneScaleSets
    executor: PlanExecutor
    locks: LeaseLocks
    metrics: RegistrarMetrics
    #: The work queue the triggers add keys to (the controller runtime's).
    queue: WorkQueue[ArsKey]
    #: What the triggers of each queued key saw (the converge controller's state).
    hints: PassHints
    #: The namespaces whose sets it registers (empty: all): the sweep lists each of them,
    #: never the whole cluster, and leaves the records of other namespaces alone.
    namespaces: tuple[str, ...] = ()
    #: After a pass that could not finish for a reason a retry now will not fix (credentials
    #: missing, a request GitHub refused), the key is looked at again after this long.
    recheck_seconds: float = 30.0
    #: Where a pass's span goes (a test's provider, else the global one).
    tracer: Tracer = field(default_factory=lambda: trace.get_tracer("arcflow.registrar"))

    def enqueue(
        self,
        namespace: str,
        name: str,
        *,
        trigger: str,
        seen_version: str = "",
        verify: bool = False,
        parent: Context | None = None,
    ) -> None:
        """Ask for a converge pass of one ARS (coalesced with any pass already waiting)."""
        self.hints.note((namespace, name), Hint(seen_version, verify, trigger, parent))
        self.queue.add(ars_key(namespace, name))


def build_context(
    *,
    kube: KubeClient,
    js: JetStreamContext,
    records: KeyValue,
    locks: LeaseLocks,
    clients: ActionsClientCache,
    queue: WorkQueue[ArsKey],
    hints: PassHints,
    metrics: RegistrarMetrics | None = None,
    source: str = SOURCE,
    namespaces: tuple[str, ...] | list[str] = (),
    ars_cache: ObjectCache | None = None,
    verify_interval: float = VERIFY_INTERVAL_SECONDS,
    **options: Any,
) -> RegistrarContext:
    metrics = metrics or RegistrarMetrics()
    reads = ClusterReads(kube, ars_cache)
    store = ScaleSetRecords(js, records)
    ars_clients = ArsClients(reads, store, clients)
    reporter = Reporter(js, metrics, source)
    gone = GoneScaleSets(verify_interval)
    executor = PlanExecutor(
        clients=ars_clients, records=store, reporter=reporter, gone=gone, metrics=metrics
    )
    return RegistrarContext(
        reads=reads,
        records=store,
        clients=ars_clients,
        reporter=reporter,
        gone=gone,
        executor=executor,
        locks=locks,
        metrics=metrics,
        queue=queue,
        hints=hints,
        namespaces=tuple(sorted(set(namespaces))),
        **options,
    )
