"""A thin async Kubernetes client on httpx, working on plain manifests.

Why plain HTTP and not the generated typed APIs (``CustomObjectsApi``/``CoreV1Api``):
- builders produce dicts; typed core APIs would round-trip them through generated models,
  which rename keys to snake_case and drop fields they do not know (runnerVariants, anything
  newer than the client);
- one code path for every kind (custom, core, rbac) means one place that sets the patch
  ``Content-Type`` (a real API server refuses a PATCH whose body type it cannot tell) and one
  error mapping;
- a watch is read line by line here, so a 410 surfaces as a typed error the watcher re-lists
  on (kubernetes_asyncio's ``Watch`` helper reconnects and retries 410 with the same stale
  resourceVersion).

Every request goes through :class:`~arcflow.common.kube.transport.KubeTransport` (one
``httpx.AsyncClient`` per client) on an :class:`~arcflow.common.kube.lite_auth.ApiConnection`:
the in-cluster service account or a kubeconfig read by :mod:`~arcflow.common.kube.lite_auth`.
kubernetes_asyncio is imported only for a kubeconfig whose user runs an exec plugin or an auth
provider (:mod:`~arcflow.common.kube.plugin_auth`), and only to load its credentials (ADR 0113).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import httpx

from arcflow.common.kube.errors import KubeApiError, error_from_status
from arcflow.common.kube.lite_auth import (
    ApiConnection,
    PluginAuthRequired,
    in_cluster_connection,
    kubeconfig_connection,
)
from arcflow.common.kube.ratelimit import TokenBucket
from arcflow.common.kube.resources import EVENT, REGISTRY, Resource, ResourceRegistry
from arcflow.common.kube.selectors import format_label_selector
from arcflow.common.kube.transport import (
    JSON,
    METADATA_ONLY_LIST,
    METADATA_ONLY_WATCH,
    KubeTransport,
)

if TYPE_CHECKING:
    from arcflow.common.kube.lite import LiteSettings

Manifest = dict[str, Any]
ResourceRef = Resource | str
LabelSelector = str | Mapping[str, str] | None
PropagationPolicy = Literal["Background", "Foreground", "Orphan"]
EventType = Literal["Normal", "Warning"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
_JSON = JSON
_EVENT_MESSAGE_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change from a watch: ``type`` and the object as the server sent it."""

    type: WatchEventType
    object: Manifest

    @property
    def resource_version(self) -> str | None:
        rv = self.object.get("metadata", {}).get("resourceVersion")
        return str(rv) if rv is not None else None


@dataclass(frozen=True, slots=True)
class ListResult:
    """A list response: the items (with ``kind``/``apiVersion`` filled in) and the list's
    resourceVersion, the point from which a watch resumes without missing anything."""

    items: list[Manifest]
    resource_version: str


def _selector_param(selector: LabelSelector) -> str | None:
    if selector is None:
        return None
    if isinstance(selector, str):
        return selector or None
    return format_label_selector(selector) or None


def _with_type(obj: Manifest, resource: Resource) -> Manifest:
    """Core list items come without ``kind``/``apiVersion``; put them back."""
    obj.setdefault("kind", resource.kind)
    obj.setdefault("apiVersion", resource.api_version)
    return obj


class WatchStream:
    """An open watch: async-iterate for :class:`WatchEvent`; use ``async with`` to close it.

    Iteration ends when the server ends the stream (``timeoutSeconds``, a restart, a broken
    connection): resume with a new watch from :attr:`resource_version`. A resourceVersion
    older than the server's history raises :class:`ResourceVersionExpired`: re-list.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str | None,
        timeout_seconds: int | None,
        field_selector: str | None,
        metadata_only: bool = False,
    ) -> None:
        self._client = client
        self._accept = METADATA_ONLY_WATCH if metadata_only else None
        self._resource = resource
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._timeout_seconds = timeout_seconds
        self.resource_version = resource_version
        self._response: httpx.Response | None = None
        self._lines: AsyncIterator[str] | None = None
        self._closed = False

    async def _open(self) -> httpx.Response:
        query: list[tuple[str, str]] = [("watch", "1"), ("allowWatchBookmarks", "true")]
        if self.resource_version:
            query.append(("resourceVersion", self.resource_version))
        if self._label_selector:
            query.append(("labelSelector", self._label_selector))
        if self._field_selector:
            query.append(("fieldSelector", self._field_selector))
        if self._timeout_seconds is not None:
            query.append(("timeoutSeconds", str(self._timeout_seconds)))
        connect = self._client.request_timeout
        read_timeout = (self._timeout_seconds + connect) if self._timeout_seconds else None
        return await self._client._transport.stream(
            self._resource.path(self._namespace),
            query,
            read_timeout=read_timeout,
            accept=self._accept,
        )

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        try:
            if self._lines is None:
                self._response = await self._open()
                self._lines = self._response.aiter_lines()
            while True:
                try:
                    line = await anext(self._lines)
                except (StopAsyncIteration, httpx.TransportError, httpx.StreamError, OSError):
                    line = None  # the server ended the stream, or the connection broke
                if line is None:
                    await self.aclose()
                    raise StopAsyncIteration
                if line.strip():
                    break
            event = self._parse(line)
        except BaseException:
            await self.aclose()
            raise
        return event

    def _parse(self, line: str) -> WatchEvent:
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise KubeApiError(f"watch sent a line that is not JSON: {exc}") from None
        if not isinstance(raw, dict) or "type" not in raw or "object" not in raw:
            if isinstance(raw, dict) and "code" in raw:
                raise error_from_status(int(raw["code"]), raw)
            raise KubeApiError("watch sent an event without 'type' and 'object'")
        event_type = str(raw["type"]).upper()
        obj = raw["object"] if isinstance(raw["object"], dict) else {}
        if event_type == "ERROR":
            code = obj.get("code")
            raise error_from_status(int(code) if isinstance(code, int) else 500, obj)
        if event_type not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            raise KubeApiError(f"watch sent an unknown event type {event_type!r}")
        if event_type != "BOOKMARK":
            _with_type(obj, self._resource)
        event = WatchEvent(event_type, obj)  # type: ignore[arg-type]
        if event.resource_version:
            self.resource_version = event.resource_version
        return event

    async def aclose(self) -> None:
        """Close the stream and give its connection back (safe to call again, and from a
        cancelled task: nothing here waits on the server)."""
        self._closed = True
        lines, self._lines = self._lines, None
        response, self._response = self._response, None
        try:
            if lines is not None:
                await lines.aclose()  # type: ignore[attr-defined]
        finally:
            if response is not None:
                await response.aclose()

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class KubeClient:
    """Get, list, create, patch, replace, delete and watch manifests of any registered kind.

    ``resource`` arguments take a :class:`Resource` or a kind name from the registry
    (``"Pod"``, ``"EphemeralRunnerSet"``).
    """

    def __init__(
        self,
        connection: ApiConnection,
        *,
        registry: ResourceRegistry = REGISTRY,
        rate_limiter: TokenBucket | None = None,
        request_timeout: float = 30.0,
        user_agent: str = "arcflow",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``transport`` replaces httpx's network transport (tests only)."""
        self._transport = KubeTransport(
            connection,
            rate_limiter=rate_limiter,
            request_timeout=request_timeout,
            user_agent=user_agent,
            transport=transport,
        )
        self.registry = registry

    def __repr__(self) -> str:
        # Never the connection's credentials: a token, a key.
        return f"KubeClient(host={self.host!r})"

    @property
    def host(self) -> str:
        return self._transport.connection.server

    @property
    def connection(self) -> ApiConnection:
        return self._transport.connection

    @property
    def rate_limiter(self) -> TokenBucket | None:
        return self._transport.rate_limiter

    @rate_limiter.setter
    def rate_limiter(self, value: TokenBucket | None) -> None:
        self._transport.rate_limiter = value

    @property
    def request_timeout(self) -> float:
        return self._transport.request_timeout

    @classmethod
    async def from_settings(
        cls, settings: LiteSettings | None = None, *, user_agent: str = "arcflow"
    ) -> KubeClient:
        """The in-cluster service account or a kubeconfig, as ``settings`` say
        (``KubeSettings`` or ``LiteKubeSettings``; default: ``KubeSettings()``)."""
        if settings is None:
            from arcflow.common.kube.settings import KubeSettings

            settings = KubeSettings()
        return cls(
            await connect(settings),
            rate_limiter=TokenBucket(settings.qps, settings.burst),
            request_timeout=settings.request_timeout,
            user_agent=user_agent,
        )

    async def close(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- plumbing ---------------------------------------------------------------------

    def resource(self, ref: ResourceRef) -> Resource:
        return ref if isinstance(ref, Resource) else self.registry.by_kind(ref)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = _JSON,
        accept: str | None = None,
    ) -> Any:
        return await self._transport.request(
            method, path, query=query, body=body, content_type=content_type, accept=accept
        )

    def _namespace_of(
        self, resource: Resource, namespace: str | None, manifest: Manifest
    ) -> str | None:
        if not resource.namespaced:
            return None
        ns = namespace or manifest.get("metadata", {}).get("namespace")
        if not ns:
            raise ValueError(f"{resource.kind} is namespaced: give a namespace")
        return str(ns)

    # --- reads ------------------------------------------------------------------------

    async def get(self, resource: ResourceRef, name: str, namespace: str | None = None) -> Manifest:
        res = self.resource(resource)
        obj: Manifest = await self._request("GET", res.path(namespace, name))
        return _with_type(obj, res)

    async def list(
        self,
        resource: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: LabelSelector = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> ListResult:
        """List objects; ``namespace=None`` lists across all namespaces. ``metadata_only``: each
        item is its ``metadata`` alone (a real server's ``PartialObjectMetadata``; one that
        cannot convert sends whole objects, which carry the same metadata)."""
        res = self.resource(resource)
        query: list[tuple[str, str]] = []
        if (selector := _selector_param(label_selector)) is not None:
            query.append(("labelSelector", selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        accept = METADATA_ONLY_LIST if metadata_only else None
        payload = await self._request("GET", res.path(namespace), query=query, accept=accept)
        items = [_with_type(item, res) for item in payload.get("items") or []]
        rv = str(payload.get("metadata", {}).get("resourceVersion", ""))
        return ListResult(items=items, resource_version=rv)

    def watch(
        self,
        resource: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: LabelSelector = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> WatchStream:
        """Open a watch (lazily, on first iteration). Without ``resource_version`` the server
        first sends ADDED for every existing object; with one, only changes after it.
        ``metadata_only`` as for :meth:`list`: every change still comes, with metadata alone."""
        return WatchStream(
            self,
            self.resource(resource),
            namespace,
            _selector_param(label_selector),
            resource_version,
            timeout_seconds,
            field_selector,
            metadata_only,
        )

    # --- writes -----------------------------------------------------------------------

    async def create(self, manifest: Manifest, *, namespace: str | None = None) -> Manifest:
        """Create from a manifest (its ``apiVersion``/``kind`` pick the resource)."""
        res = self.registry.for_manifest(manifest)
        ns = self._namespace_of(res, namespace, manifest)
        obj: Manifest = await self._request("POST", res.path(ns), body=manifest)
        return _with_type(obj, res)

    async def replace(self, manifest: Manifest, *, namespace: str | None = None) -> Manifest:
        """PUT the whole object; carry ``metadata.resourceVersion`` for a conditional write."""
        res = self.registry.for_manifest(manifest)
        ns = self._namespace_of(res, namespace, manifest)
        name = manifest.get("metadata", {}).get("name")
        if not name:
            raise ValueError("replace needs metadata.name")
        obj: Manifest = await self._request("PUT", res.path(ns, name), body=manifest)
        return _with_type(obj, res)

    async def patch_merge(
        self,
        resource: ResourceRef,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> Manifest:
        """RFC 7386 merge patch (``null`` deletes a key; lists are replaced whole). Put
        ``metadata.resourceVersion`` in the patch to make it conditional (409 if stale)."""
        res = self.resource(resource)
        obj: Manifest = await self._request(
            "PATCH", res.path(namespace, name), body=dict(patch), content_type=MERGE_PATCH
        )
        return _with_type(obj, res)

    async def patch_status(
        self,
        resource: ResourceRef,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> Manifest:
        """Merge-patch ``.status`` through the status subresource."""
        res = self.resource(resource)
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        obj: Manifest = await self._request(
            "PATCH", res.path(namespace, name, "status"), body=body, content_type=MERGE_PATCH
        )
        return _with_type(obj, res)

    async def patch_json(
        self,
        resource: ResourceRef,
        name: str,
        operations: Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        """RFC 6902 JSON patch; a ``test`` op makes it conditional (e.g. on a finalizer list)."""
        res = self.resource(resource)
        obj: Manifest = await self._request(
            "PATCH",
            res.path(namespace, name, subresource),
            body=[dict(op) for op in operations],
            content_type=JSON_PATCH,
        )
        return _with_type(obj, res)

    async def delete(
        self,
        resource: ResourceRef,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy = "Background",
        resource_version: str | None = None,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Manifest | None:
        """Delete; with finalizers the object only gets a deletionTimestamp. Preconditions on
        ``resource_version``/``uid`` make it conditional (409 if they no longer hold).
        ``grace_period_seconds=0`` removes a pod at once (one whose node is gone)."""
        res = self.resource(resource)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation_policy,
        }
        preconditions = {
            key: value
            for key, value in (("resourceVersion", resource_version), ("uid", uid))
            if value is not None
        }
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        payload = await self._request("DELETE", res.path(namespace, name), body=options)
        return payload if isinstance(payload, dict) else None

    async def emit_event(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        type: EventType = "Normal",
        component: str = "arcflow",
    ) -> Manifest:
        """Record a core/v1 Event about ``obj`` (what ``kubectl describe`` shows)."""
        return await self.create(build_event(obj, reason, message, type=type, component=component))


def build_event(
    obj: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    type: EventType = "Normal",
    component: str = "arcflow",
    now: datetime | None = None,
) -> Manifest:
    """The core/v1 Event manifest for ``obj`` (pure; named ``<object>.<hex time>`` as kubelet
    and client-go do, so names are unique and sort by time)."""
    if type not in ("Normal", "Warning"):
        raise ValueError(f"event type must be Normal or Warning, got {type!r}")
    if not reason:
        raise ValueError("event reason must not be empty")
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError("the involved object needs metadata.name")
    namespace = metadata.get("namespace") or "default"
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    involved = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": name,
        "namespace": metadata.get("namespace", ""),
        "uid": metadata.get("uid", ""),
        "resourceVersion": metadata.get("resourceVersion", ""),
    }
    return {
        "apiVersion": EVENT.api_version,
        "kind": EVENT.kind,
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {k: v for k, v in involved.items() if v},
        "reason": reason,
        "message": message[:_EVENT_MESSAGE_LIMIT],
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


async def connect(settings: LiteSettings) -> ApiConnection:
    """Where ``settings`` point: the pod's service account or a kubeconfig (read by
    :mod:`~arcflow.common.kube.lite_auth`; one whose user runs an exec plugin or an auth
    provider loaded by kubernetes_asyncio, imported only then)."""
    if settings.in_cluster:
        return in_cluster_connection()
    try:
        return kubeconfig_connection(settings.kubeconfig, settings.context)
    except PluginAuthRequired as required:
        from arcflow.common.kube.plugin_auth import plugin_connection

        return await plugin_connection(required)


async def iterate(stream: WatchStream) -> AsyncIterator[WatchEvent]:
    """Async-generator view of a stream that always closes it (handy in ``asyncio.timeout``)."""
    async with stream:
        async for event in stream:
            yield event


__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "KubeClient",
    "ListResult",
    "Manifest",
    "WatchEvent",
    "WatchStream",
    "build_event",
    "connect",
]
