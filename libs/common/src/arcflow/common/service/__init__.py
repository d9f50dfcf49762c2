"""One service skeleton: declare a :class:`ServiceSpec`, run it with :func:`main`.

Importing this package imports neither FastStream, nor the Kubernetes client, nor the
OpenTelemetry exporters: the runtime imports each when a spec needs it (subscriptions,
``kube_settings``, the metrics server), so a light process can adopt the skeleton.
"""

from arcflow.common.service.context import ServiceContext
from arcflow.common.service.endpoints import RpcEndpoint
from arcflow.common.service.loop import Loop
from arcflow.common.service.spec import (
    Component,
    Handler,
    InvalidSettingsError,
    Part,
    PeriodicTask,
    Publication,
    ServiceSpec,
    Subscription,
)

__all__ = [
    "Component",
    "Handler",
    "InvalidSettingsError",
    "Loop",
    "Part",
    "PeriodicTask",
    "Publication",
    "RpcEndpoint",
    "ServiceContext",
    "ServiceSpec",
    "Subscription",
    "main",
]


def main(spec: ServiceSpec) -> int:  # type: ignore[type-arg]
    """Run ``spec`` as this process (see :mod:`arcflow.common.service.entry` for exit codes)."""
    from arcflow.common.service.entry import main as run_main

    return run_main(spec)
