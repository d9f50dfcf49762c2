"""arcflow's Kubernetes layer: resource registry, typed errors, settings and a dict-based client.

``KubeClient`` and friends (on httpx, ADR 0113) and ``KubeSettings`` (pydantic-settings) are
imported on first use of their names, so the errors, resources and selectors stay light for a
process that never needs a client.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arcflow.common.kube.client import (
        JSON_PATCH,
        MERGE_PATCH,
        KubeClient,
        ListResult,
        Manifest,
        WatchEvent,
        WatchStream,
        build_event,
    )
from arcflow.common.kube.errors import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    KubeApiError,
    KubeConnectionError,
    NotFoundError,
    ResourceVersionExpired,
    error_from_status,
)
from arcflow.common.kube.ratelimit import TokenBucket
from arcflow.common.kube.resources import (
    ARC_RESOURCES,
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    CUSTOM_RESOURCE_DEFINITION,
    DEFAULT_RESOURCES,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    EVENT,
    NAMESPACE,
    POD,
    REGISTRY,
    RESOURCE_QUOTA,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    Resource,
    ResourceRegistry,
)
from arcflow.common.kube.selectors import (
    LabelSelectorError,
    Requirement,
    format_label_selector,
    parse_label_selector,
    selector_matches,
)

if TYPE_CHECKING:
    from arcflow.common.kube.settings import KubeSettings

_CLIENT_NAMES = frozenset(
    {
        "JSON_PATCH",
        "MERGE_PATCH",
        "KubeClient",
        "ListResult",
        "Manifest",
        "WatchEvent",
        "WatchStream",
        "build_event",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from arcflow.common.kube import client as module
    elif name == "KubeSettings":  # pydantic-settings: ~4 MiB a light process does without
        from arcflow.common.kube import settings as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "ARC_RESOURCES",
    "AUTOSCALING_LISTENER",
    "AUTOSCALING_RUNNER_SET",
    "CONFIG_MAP",
    "CUSTOM_RESOURCE_DEFINITION",
    "DEFAULT_RESOURCES",
    "EPHEMERAL_RUNNER",
    "EPHEMERAL_RUNNER_SET",
    "EVENT",
    "JSON_PATCH",
    "MERGE_PATCH",
    "NAMESPACE",
    "POD",
    "REGISTRY",
    "RESOURCE_QUOTA",
    "ROLE",
    "ROLE_BINDING",
    "SECRET",
    "SERVICE_ACCOUNT",
    "ConflictError",
    "ForbiddenError",
    "InvalidError",
    "KubeApiError",
    "KubeClient",
    "KubeConnectionError",
    "KubeSettings",
    "LabelSelectorError",
    "ListResult",
    "Manifest",
    "NotFoundError",
    "Requirement",
    "Resource",
    "ResourceRegistry",
    "ResourceVersionExpired",
    "TokenBucket",
    "WatchEvent",
    "WatchStream",
    "build_event",
    "error_from_status",
    "format_label_selector",
    "parse_label_selector",
    "selector_matches",
]
