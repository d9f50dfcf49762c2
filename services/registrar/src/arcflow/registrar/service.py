"""The registrar, declared: one GitHub runner scale set per variant, JIT configs over RPC.

Its subscriptions and its sweep only enqueue ARS keys; the converge controller
(:mod:`arcflow.registrar.controller`), run by the common controller runtime, runs the passes
(ADR 0072, ADR 0095)."""

from __future__ import annotations

from arcflow.common.events import (
    K8sObjectChanged,
    RegistrationFailed,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SpecInvalid,
)
from arcflow.common.kube.settings import KubeSettings
from arcflow.common.nats.jetstream import CONSUMER_REGISTRAR_ARS, KV_SCALESETS, ConsumerSpec
from arcflow.common.rpc import registrar as rpc
from arcflow.common.service import (
    PeriodicTask,
    Publication,
    RpcEndpoint,
    ServiceSpec,
    Subscription,
)
from arcflow.registrar import state
from arcflow.registrar.controller import DECLARED
from arcflow.registrar.k8s_changes import CONSUMER_REGISTRAR_ERS, on_k8s_change
from arcflow.registrar.locks import LOCKS_BUCKET
from arcflow.registrar.settings import RegistrarSettings, tune_consumer


def _changes(consumer: ConsumerSpec) -> Subscription:
    return Subscription(
        consumer,
        (K8sObjectChanged,),
        on_k8s_change,
        concurrency=16,
        tune=tune_consumer,
    )


SERVICE: ServiceSpec[state.RegistrarState] = ServiceSpec(
    name="registrar",
    settings=RegistrarSettings,
    build=state.build,
    components=state.components,
    kube_settings=lambda _settings: KubeSettings(),
    buckets=(KV_SCALESETS, LOCKS_BUCKET),
    # Its one controller (ADR 0095): the controller runtime builds its work queue and typed
    # adapter from it; the subscriptions below route through it.
    controllers=DECLARED,
    subscriptions=(_changes(CONSUMER_REGISTRAR_ARS), _changes(CONSUMER_REGISTRAR_ERS)),
    periodic=(PeriodicTask("sweep", lambda s: s.resync_interval_seconds, state.sweep),),
    # What the RPC server serves, exactly (rpc_server.py refuses to start otherwise).
    rpc=(
        RpcEndpoint(
            rpc.JITCONFIG_SUBJECT,
            rpc.JitConfigRequest,
            rpc.JitConfigResult,
            "register a just-in-time runner and return its JIT config (the reconciler)",
            carries_secret=True,
        ),
        RpcEndpoint(
            rpc.REMOVE_RUNNER_SUBJECT,
            rpc.RemoveRunnerRequest,
            rpc.RemoveRunnerResult,
            "remove a registered runner unless it still runs a job (the reconciler)",
        ),
        RpcEndpoint(
            rpc.GET_RUNNER_SUBJECT,
            rpc.GetRunnerRequest,
            rpc.GetRunnerResult,
            "the registered runner of a name, if any (the reconciler)",
        ),
        RpcEndpoint(
            rpc.LIST_RUNNERS_SUBJECT,
            rpc.ListRunnersRequest,
            rpc.ListRunnersResult,
            "the runners registered in the named scale sets of one ARS, from one listing (the "
            "reconciler's orphan scan)",
        ),
        RpcEndpoint(
            rpc.SCALE_SETS_SUBJECT,
            rpc.ScaleSetsRequest,
            rpc.ScaleSetsResult,
            "GitHub's view of the ARS's registered scale sets (arcflow doctor)",
        ),
    ),
    publishes=(
        Publication("arc.scalesets.<ns>.<ars>.<variant>", (ScaleSetAssigned, ScaleSetDeleted)),
        Publication("arc.errors.<ns>.<ars>", (SpecInvalid, RegistrationFailed)),
    ),
)
