"""The real watcher, registrar and reconciler, each as the ServiceAccount its chart gives it
(rendered with helm, applied to a real API server), take an ARS with two variants from apply
to a registered runner, and none of them is refused a single request: with the charts' default
cluster-wide RBAC, and with ``rbac.clusterWide=false`` (Roles in the listed namespaces only),
where each service lists and watches only those namespaces (``ARCFLOW_<SERVICE>_NAMESPACES``).

This is where a chart granting too little shows: the API server checks every list, watch and
write the services really make, and the Role the reconciler creates for each listener must pass
its escalation check (it may only grant what the reconciler holds).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.cache import ObjectCache
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    ROLE,
    ROLE_BINDING,
    SERVICE_ACCOUNT,
    KubeClient,
    Resource,
)
from arcflow.common.nats import NatsSettings
from arcflow.common.service.inprocess import ServiceRun, running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.reconciler.cache import cached_kinds
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.registrar.lookup import ars_cached_kind
from arcflow.registrar.settings import RegistrarSettings
from tests.fast_services import control_plane as service_runs
from tests.manifests import pat_secret
from tests.polling import eventually

from .kube_identities import CHART_SERVICES, KubeIdentities, open_identities

pytestmark = pytest.mark.integration

SECRET_NAME = "github-creds"


def _template(image: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "runner", "image": image}]}}


#: The one 403 that is not RBAC's: a write into a namespace being deleted. Other tests of the
#: session leave such namespaces behind, and cluster-wide services see the sets in them.
_TERMINATING = "because it is being terminated"

#: The HTTP client's own debug records (one per request and response, status only): the test
#: judges the services' reports of a refusal, which carry the server's reason.
_TRANSPORT_LOGGERS = frozenset({"httpx", "httpcore"})


def _refusals(records: list[logging.LogRecord]) -> list[str]:
    """Every log record reporting an RBAC 403 (by status or by the error's type), as
    ``logger: message`` (the services never log a token)."""
    found = []
    for record in records:
        if record.name.split(".")[0] in _TRANSPORT_LOGGERS:
            continue  # a request's status line, without the reason; arcflow's own record has it
        text = f"{record.getMessage()} {getattr(record, 'error', '')}"
        forbidden = getattr(record, "status", None) == 403 or "Forbidden" in text
        if forbidden and _TERMINATING not in text:
            found.append(f"{record.name}: {text.strip()}")
    return found


def _ars(name: str, namespace: str, config_url: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": SECRET_NAME,
            "template": _template("runner:latest"),
            "runnerVariants": [
                {"name": "cpu", "template": _template("runner:cpu")},
                {"name": "gpu", "template": _template("runner:gpu")},
            ],
        },
    }


async def _names(kube: KubeClient, resource: Resource, namespace: str) -> set[str]:
    return {o["metadata"]["name"] for o in (await kube.list(resource, namespace=namespace)).items}


@dataclass
class Stack:
    namespace: str  # where the ARS lives
    controller_namespace: str
    #: The chart's own RoleBindings in ``namespace`` (namespace-scoped RBAC puts them there).
    chart_bindings: frozenset[str] = frozenset()


@pytest.fixture
def identities(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeIdentities]:
    with open_identities(request, tmp_path / "identities") as ids:
        yield ids


def _scoped_to(run: ServiceRun, namespaces: list[str]) -> ServiceRun:
    """``run`` with its ``namespaces`` setting, as ``ARCFLOW_<SERVICE>_NAMESPACES`` gives it."""
    return replace(run, settings=run.settings.model_copy(update={"namespaces": namespaces}))


@pytest.fixture(params=["cluster-wide", "namespace-scoped"])
async def stack(
    request: pytest.FixtureRequest, identities: KubeIdentities, private_nats_server: NatsServer
) -> AsyncIterator[Stack]:
    """The chart's identities, each service its own client: cluster-wide (the default), or
    ``rbac.clusterWide=false`` with the ARS namespace listed, where each service gets the
    namespaces setting the chart renders for it (ARCFLOW_<SERVICE>_NAMESPACES)."""
    suffix = secrets.token_hex(3)
    controller_ns = identities.namespace(f"rbac-sys-{suffix}")
    runners_ns = identities.namespace(f"rbac-runners-{suffix}")
    scoped = [runners_ns] if request.param == "namespace-scoped" else []
    services = identities.from_charts(
        release=f"rbac-{suffix}", namespace=controller_ns, namespaces=scoped or None
    )
    runs = {
        run.spec.name: _scoped_to(run, scoped)
        for run in service_runs(
            namespaces=scoped,  # empty: cluster-wide, the chart then sets no NAMESPACES
            nats_for=lambda _service: NatsSettings(url=private_nats_server.url),
            reconciler_settings=ReconcilerSettings(
                controller_namespace=controller_ns,
                listener_image="ghcr.io/arcflow/listener:test",
                workers=2,
                retry_base_seconds=0.05,
                retry_cap_seconds=0.5,
                resync_interval_seconds=3600,
                fetch_timeout_seconds=0.2,
                rpc_timeout_seconds=2,
                pending_status_delay_seconds=0,
            ),
        )
    }
    chart_bindings = frozenset(
        doc["metadata"]["name"]
        for identity in services.values()
        for doc in identity.objects
        if doc["kind"] == "RoleBinding" and doc["metadata"].get("namespace") == runners_ns
    )
    clients = {name: await services[name].client() for name in CHART_SERVICES}
    try:
        async with (
            running(runs["watcher"], kube=clients["watcher"]),
            running(runs["registrar"], kube=clients["registrar"]),
            running(runs["reconciler"], kube=clients["reconciler"]),
        ):
            yield Stack(runners_ns, controller_ns, chart_bindings)
    finally:
        for client in clients.values():
            await client.close()


async def test_services_run_under_their_chart_identities(
    stack: Stack,
    kube_client: KubeClient,
    actions_sim: ActionsSimulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube, ns, sys_ns = kube_client, stack.namespace, stack.controller_namespace
    await kube.create(pat_secret(SECRET_NAME, ns, actions_sim.add_pat()))
    await kube.create(_ars("least", ns, actions_sim.config_url("my-org")))

    async def converged() -> list[dict[str, Any]]:
        ars = await kube.get(AUTOSCALING_RUNNER_SET, "least", ns)
        assert "actions.github.com/runner-scale-set-ids" in (
            ars["metadata"].get("annotations") or {}
        )
        sets = (await kube.list(EPHEMERAL_RUNNER_SET, namespace=ns)).items
        assert sorted(s["metadata"]["name"] for s in sets) == ["least-cpu", "least-gpu"]
        listeners = (await kube.list(AUTOSCALING_LISTENER, namespace=sys_ns)).items
        assert len(listeners) == 1
        # The listener's bundle, written by the reconciler under its own identity.
        name = listeners[0]["metadata"]["name"]
        assert await _names(kube, SERVICE_ACCOUNT, sys_ns) >= {name}
        assert await _names(kube, ROLE_BINDING, ns) - stack.chart_bindings == {name}
        role = await kube.get(ROLE, name, ns)
        assert role["rules"][0]["resourceNames"] == ["least-cpu", "least-gpu"]
        pods = (await kube.list(POD, namespace=sys_ns)).items
        assert [p["metadata"]["name"] for p in pods] == [name]
        return listeners

    await eventually(converged, within=20, what="ARS converged")
    # The runner path: the reconciler creates a runner, asks the registrar for its JIT config.
    await kube.patch_merge(
        EPHEMERAL_RUNNER_SET, "least-gpu", {"spec": {"replicas": 1, "patchID": 1}}, namespace=ns
    )

    async def registered() -> bool:
        runners = (await kube.list(EPHEMERAL_RUNNER, namespace=ns)).items
        assert len(runners) == 1
        assert (runners[0].get("status") or {}).get("runnerId")
        return True

    await eventually(registered, within=20, what="a registered runner")
    # From the services' start (the fixture) to now: not one request refused.
    assert _refusals([*caplog.get_records("setup"), *caplog.get_records("call")]) == []


@pytest.mark.parametrize("service", ["reconciler", "registrar"])
async def test_scoped_identities_sync_their_caches(
    service: str,
    identities: KubeIdentities,
    kube_client: KubeClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The caches exactly as the services build them with ``namespaces`` set, as the
    namespace-scoped identity (rbac.clusterWide=false): they sync, see what is in the listed
    namespace (and the controller namespace), nothing of another, and nothing is refused."""
    suffix = secrets.token_hex(3)
    controller_ns = identities.namespace(f"rbac-sys-{suffix}")
    runners_ns = identities.namespace(f"rbac-runners-{suffix}")
    other_ns = identities.namespace(f"rbac-other-{suffix}")
    for ns in (runners_ns, other_ns):
        await kube_client.create(_ars("seen" if ns == runners_ns else "unseen", ns, "http://x/o"))
    scoped = identities.from_charts(
        release=f"rbac-{suffix}",
        namespace=controller_ns,
        namespaces=[runners_ns],
        services=[service],
    )[service]
    async with await scoped.client() as kube:
        cache = (
            ObjectCache(
                kube,
                cached_kinds(ReconcilerSettings(namespaces=[runners_ns]).namespaces, controller_ns),
                relist_seconds=3600,
            )
            if service == "reconciler"
            else ObjectCache(  # JitLookup's
                kube, [ars_cached_kind(RegistrarSettings(namespaces=[runners_ns]).namespaces)]
            )
        )
        cache.start()
        try:
            await asyncio.wait_for(cache.synced(), 10)
        finally:
            await cache.stop()
    assert _refusals(caplog.records) == []
    assert [
        (m["metadata"]["namespace"], m["metadata"]["name"])
        for m in cache.list(AUTOSCALING_RUNNER_SET)
    ] == [(runners_ns, "seen")]
    # Nothing is listed or watched cluster-wide, and the controller namespace only where the
    # reconciler's kinds live.
    watched = {informer.namespace for informer in cache.informers.values()}
    assert watched == ({runners_ns, controller_ns} if service == "reconciler" else {runners_ns})
