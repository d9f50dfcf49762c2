"""Several services in one event loop, for tests: the same runtime ``main`` uses.

    async with running(
        ServiceRun(WATCHER, watcher_settings),
        ServiceRun(REGISTRAR, registrar_settings, overrides={"client_factory": fast}),
        kube=kube,
    ) as runtimes:
        ...

Services start in the order given and stop in reverse. Each gets its own NATS connection
(``nats`` per run, e.g. a restricted user); health and metrics servers are off unless asked.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from arcflow.common.service.connection import ErrorHook
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.common.service.spec import ServiceSpec

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

    from arcflow.common.kube import KubeClient
    from arcflow.common.nats.settings import NatsSettings


@dataclass
class ServiceRun:
    """One service to run: its spec, settings and test-only options."""

    spec: ServiceSpec[Any]
    settings: Any
    nats: NatsSettings | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    on_nats_error: ErrorHook | None = None
    serve_health: bool = False
    run_periodic: bool = True
    #: Where its metrics go (a test's in-memory reader); none by default.
    meter: Meter | None = None


@contextlib.asynccontextmanager
async def running(
    *runs: ServiceRun, kube: KubeClient | None = None
) -> AsyncIterator[dict[str, ServiceRuntime]]:
    """Start every run in order (sharing ``kube`` when given); stop them in reverse."""
    started: list[ServiceRuntime] = []
    try:
        for run in runs:
            runtime = ServiceRuntime(
                run.spec,
                run.settings,
                nats_settings=run.nats,
                kube=kube,
                overrides=run.overrides,
                serve_health=run.serve_health,
                serve_metrics=False,
                on_nats_error=run.on_nats_error,
                run_periodic=run.run_periodic,
                meter=run.meter,
            )
            await runtime.start()
            started.append(runtime)
        yield {r.spec.name: r for r in started}
    finally:
        for runtime in reversed(started):
            await runtime.stop()


async def subscriptions_only(
    url: str, spec: ServiceSpec[Any], state: Any, *, fetch_timeout: float | None = None
) -> ServiceRuntime:
    """A started runtime with only ``spec``'s subscriptions, handed ``state`` instead of what
    its ``build`` makes (no components, Kubernetes client, periodic tasks or servers): for
    tests and benchmarks of the consume path. ``fetch_timeout`` caps the batch window."""

    from arcflow.common.nats.settings import NatsSettings

    async def build(_ctx: Any) -> Any:
        return state

    stub = replace(spec, build=build, components=None, kube_settings=None, periodic=())
    runtime = ServiceRuntime(
        stub,
        spec.settings(),
        nats_settings=NatsSettings(url=url),
        serve_health=False,
        serve_metrics=False,
        fetch_timeout=fetch_timeout,
    )
    await runtime.start()
    return runtime
