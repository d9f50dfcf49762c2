"""Descriptors of the Kubernetes resources arcflow reads and writes.

The client works on plain manifests (dicts), so the only thing it needs to know about a kind
is where it lives in the REST API: group, version, plural, scope, and whether it has a
``status`` subresource. One registry keeps that in one place for the client, the emulator and
the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from arcflow.common import constants


@dataclass(frozen=True, slots=True)
class Resource:
    """Where one kind lives in the API. ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    has_status: bool = False
    singular: str = ""
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``apiVersion`` as written in a manifest (``v1`` for core, ``group/version`` else)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_plural(self) -> str:
        """``plural.group`` (``pods`` for core), the name the API uses in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_custom(self) -> bool:
        """True for kinds served from CRDs (no strategic merge patch on a real server)."""
        return self.group not in _BUILTIN_GROUPS

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of a collection, an object or an object's subresource.

        ``namespace=None`` on a namespaced kind addresses the collection across all
        namespaces (valid for list and watch only).
        """
        if name is None and subresource is not None:
            raise ValueError("a subresource needs an object name")
        if self.namespaced and name is not None and not namespace:
            raise ValueError(f"{self.kind} is namespaced: a namespace is required for {name!r}")
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError(f"empty {self.kind} name")
            parts.append(quote(name, safe=""))
        if subresource is not None:
            parts.append(subresource)
        return "/".join(parts)


_BUILTIN_GROUPS: Final = frozenset({"", "rbac.authorization.k8s.io", "apps", "batch"})

_ACTIONS_GROUP: Final = constants.GROUP
_ACTIONS_VERSION: Final = constants.VERSION

AUTOSCALING_RUNNER_SET: Final = Resource(
    _ACTIONS_GROUP,
    _ACTIONS_VERSION,
    constants.PLURAL_ARS,
    constants.KIND_ARS,
    has_status=True,
    singular="autoscalingrunnerset",
    short_names=("ars",),
)
EPHEMERAL_RUNNER_SET: Final = Resource(
    _ACTIONS_GROUP,
    _ACTIONS_VERSION,
    constants.PLURAL_ERS,
    constants.KIND_ERS,
    has_status=True,
    singular="ephemeralrunnerset",
    short_names=("ers",),
)
EPHEMERAL_RUNNER: Final = Resource(
    _ACTIONS_GROUP,
    _ACTIONS_VERSION,
    constants.PLURAL_ER,
    constants.KIND_ER,
    has_status=True,
    singular="ephemeralrunner",
    short_names=("er",),
)
AUTOSCALING_LISTENER: Final = Resource(
    _ACTIONS_GROUP,
    _ACTIONS_VERSION,
    constants.PLURAL_AL,
    constants.KIND_AL,
    has_status=True,
    singular="autoscalinglistener",
)
POD: Final = Resource("", "v1", "pods", "Pod", has_status=True, singular="pod", short_names=("po",))
SECRET: Final = Resource("", "v1", "secrets", "Secret", singular="secret")
SERVICE_ACCOUNT: Final = Resource(
    "", "v1", "serviceaccounts", "ServiceAccount", singular="serviceaccount", short_names=("sa",)
)
RESOURCE_QUOTA: Final = Resource(
    "",
    "v1",
    "resourcequotas",
    "ResourceQuota",
    has_status=True,
    singular="resourcequota",
    short_names=("quota",),
)
CONFIG_MAP: Final = Resource(
    "", "v1", "configmaps", "ConfigMap", singular="configmap", short_names=("cm",)
)
EVENT: Final = Resource("", "v1", "events", "Event", singular="event", short_names=("ev",))
NAMESPACE: Final = Resource(
    "",
    "v1",
    "namespaces",
    "Namespace",
    namespaced=False,
    has_status=True,
    singular="namespace",
    short_names=("ns",),
)
ROLE: Final = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", singular="role")
ROLE_BINDING: Final = Resource(
    "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", singular="rolebinding"
)
CUSTOM_RESOURCE_DEFINITION: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    has_status=True,
    singular="customresourcedefinition",
    short_names=("crd", "crds"),
)

#: The four ARC kinds, in ownership order (top-level first).
ARC_RESOURCES: Final = (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    EPHEMERAL_RUNNER,
    AUTOSCALING_LISTENER,
)

#: Every kind arcflow talks to.
DEFAULT_RESOURCES: Final = (
    *ARC_RESOURCES,
    POD,
    SECRET,
    SERVICE_ACCOUNT,
    CONFIG_MAP,
    EVENT,
    NAMESPACE,
    RESOURCE_QUOTA,
    ROLE,
    ROLE_BINDING,
    CUSTOM_RESOURCE_DEFINITION,
)


class ResourceRegistry:
    """Look resources up by kind, by ``apiVersion``+``kind`` or from a manifest."""

    def __init__(self, resources: Iterable[Resource] = DEFAULT_RESOURCES) -> None:
        self._by_gvk: dict[tuple[str, str], Resource] = {}
        self._by_kind: dict[str, Resource] = {}
        for resource in resources:
            self.register(resource)

    def register(self, resource: Resource) -> None:
        self._by_gvk[(resource.api_version, resource.kind)] = resource
        self._by_kind.setdefault(resource.kind, resource)

    def __iter__(self) -> Any:
        return iter(self._by_gvk.values())

    def by_kind(self, kind: str, api_version: str | None = None) -> Resource:
        """The resource of ``kind`` (optionally pinned to ``api_version``)."""
        found = (
            self._by_gvk.get((api_version, kind))
            if api_version is not None
            else self._by_kind.get(kind)
        )
        if found is None:
            where = f" in {api_version}" if api_version else ""
            raise KeyError(f"unknown kind {kind!r}{where}: register it first")
        return found

    def for_manifest(self, manifest: Mapping[str, Any]) -> Resource:
        """The resource a manifest's ``apiVersion`` and ``kind`` name."""
        kind = manifest.get("kind")
        api_version = manifest.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(api_version, str):
            raise ValueError("manifest needs string 'apiVersion' and 'kind'")
        return self.by_kind(kind, api_version)


#: The shared default registry.
REGISTRY: Final = ResourceRegistry()
