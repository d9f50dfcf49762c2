"""What the registrar's converge controller shares (the registrar's counterpart of the
reconciler's ``Context``): its reads, the registrations, the Actions clients, the reporter,
the scale sets GitHub deleted, the plan executor, the lease locks and its work queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Tracer

from arcflow.common.kube import KubeClient
from arcflow.common.reconcile.keys import Key
from arcflow.common.reconcile.workqueue import WorkQueue
from arcflow.registrar.ars_clients import ArsClients
from arcflow.registrar.ars_reads import ClusterReads
from arcflow.registrar.credentials import ActionsClientCache
from arcflow.registrar.execution import PlanExecutor
from arcflow.registrar.gone import GoneScaleSets
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


@dataclass
class RegistrarContext:
    reads: ClusterReads
    records: ScaleSetRecords
    clients: ArsClients
    reporter: Reporter
    gone: GoneScaleSets
    executor: PlanExecutor
    locks: LeaseLocks
    metrics: RegistrarMetrics
    #: The namespaces whose sets it registers (empty: all): the sweep lists each of them,
    #: never the whole cluster, and leaves the records of other namespaces alone.
    namespaces: tuple[str, ...] = ()
    #: After a pass that could not finish for a reason a retry now will not fix (credentials
    #: missing, a request GitHub refused), the key is looked at again after this long.
    recheck_seconds: float = 30.0
    hints: PassHints = field(default_factory=PassHints)
    #: The work queue the triggers add keys to (set once built: its reconcile needs this).
    queue: WorkQueue[ArsKey] | None = None
    #: Passes that finished (not raised): tests and benchmarks read it.
    handled: int = 0
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
        assert self.queue is not None, "the converge queue is not built"
        self.queue.add(ars_key(namespace, name))


def build_context(
    *,
    kube: KubeClient,
    js: JetStreamContext,
    records: KeyValue,
    locks: LeaseLocks,
    clients: ActionsClientCache,
    metrics: RegistrarMetrics | None = None,
    source: str = SOURCE,
    namespaces: tuple[str, ...] | list[str] = (),
    **options: Any,
) -> RegistrarContext:
    metrics = metrics or RegistrarMetrics()
    reads = ClusterReads(kube)
    store = ScaleSetRecords(js, records)
    ars_clients = ArsClients(reads, store, clients)
    reporter = Reporter(js, metrics, source)
    gone = GoneScaleSets()
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
        namespaces=tuple(sorted(set(namespaces))),
        **options,
    )
