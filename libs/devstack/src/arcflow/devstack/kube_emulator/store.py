"""The emulator's state: objects, the resourceVersion counter, watch history, GC.

No HTTP here: every operation takes and returns plain dicts and raises :class:`ApiStatus`
for the error the real API server would answer, so the HTTP layer only translates. The event
loop is single-threaded and no method awaits, so each operation (including the garbage
collection it triggers) is atomic, like one etcd transaction per write.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import re
import secrets
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from arcflow.common.kube.resources import (
    CUSTOM_RESOURCE_DEFINITION,
    DEFAULT_RESOURCES,
    NAMESPACE,
    Resource,
)
from arcflow.common.kube.selectors import Requirement, selector_matches
from arcflow.devstack.kube_emulator.patching import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
)

Obj = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace or "", name)
ResourceKey = tuple[str, str]  # (group, plural)

FOREGROUND_FINALIZER = "foregroundDeletion"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PATH_SEGMENT_FORBIDDEN = re.compile(r"[/%]")
_RBAC_GROUP = "rbac.authorization.k8s.io"


class ApiStatus(Exception):  # noqa: N818 - it is the API's Status object
    """An error the API server answers with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def body(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: Resource, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    if name:
        details["name"] = name
    return details


def not_found(resource: Resource, name: str) -> ApiStatus:
    return ApiStatus(
        404,
        "NotFound",
        f'{resource.qualified_plural} "{name}" not found',
        _details(resource, name),
    )


def conflict(resource: Resource, name: str, why: str) -> ApiStatus:
    return ApiStatus(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified_plural} "{name}": {why}',
        _details(resource, name),
    )


def invalid(resource: Resource, name: str, causes: list[tuple[str, str]]) -> ApiStatus:
    summary = ", ".join(f"{fld}: {msg}" for fld, msg in causes)
    details = _details(resource, name)
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": msg, "field": fld} for fld, msg in causes
    ]
    return ApiStatus(422, "Invalid", f'{resource.kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiStatus:
    return ApiStatus(400, "BadRequest", message)


def expired(requested: int, oldest: int) -> ApiStatus:
    return ApiStatus(410, "Expired", f"too old resource version: {requested} ({oldest})")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _body_sans(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def _parse_rv(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(str(value))
    except ValueError:
        return -1


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``path=value`` / ``path!=value`` on a dotted field path (``metadata.name``)."""

    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        node: Any = obj
        for part in self.path:
            node = node.get(part) if isinstance(node, dict) else None
        actual = "" if node is None else str(node)
        return (actual != self.value) if self.negate else (actual == self.value)


#: The field selectors a real server accepts beyond ``metadata.name`` and
#: ``metadata.namespace`` (which every kind has), per built-in kind; custom kinds accept only
#: those two (unless their CRD declares ``selectableFields``, which arcflow's do not).
_SELECTABLE_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
}
_ALWAYS_SELECTABLE = frozenset({"metadata.name", "metadata.namespace"})


def check_field_selector(resource: Resource, fields: tuple[FieldRequirement, ...]) -> None:
    """400 for a field the real server cannot select on (it answers so, it never ignores)."""
    allowed = _ALWAYS_SELECTABLE | _SELECTABLE_FIELDS.get(
        (resource.group, resource.plural), frozenset()
    )
    for requirement in fields:
        label = ".".join(requirement.path)
        if label not in allowed:
            raise bad_request(
                f"field label not supported for {resource.qualified_plural}: {label} "
                f"(selectable: {', '.join(sorted(allowed))})"
            )


def parse_field_selector(selector: str | None) -> tuple[FieldRequirement, ...]:
    if not selector:
        return ()
    result: list[FieldRequirement] = []
    for part in selector.split(","):
        part = part.strip()
        for op, negate in (("!=", True), ("==", False), ("=", False)):
            if op in part:
                key, value = part.split(op, 1)
                result.append(
                    FieldRequirement(tuple(key.strip().split(".")), value.strip(), negate)
                )
                break
        else:
            raise bad_request(f"invalid field selector requirement {part!r}")
    return tuple(result)


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One committed change, kept for resuming watches."""

    rv: int
    type: str
    resource: ResourceKey
    namespace: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    """One open watch; the HTTP handler drains ``queue`` (``None`` ends the stream)."""

    resource: ResourceKey
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    queue: asyncio.Queue[Obj | None] = field(default_factory=asyncio.Queue)
    abort: bool = False

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        labels = _meta(obj).get("labels")
        return selector_matches(self.labels, labels) and all(f.matches(obj) for f in self.fields)

    def wants(self, event: HistoryEvent) -> Obj | None:
        """The watch event this watcher sees for ``event``, or None."""
        if event.resource != self.resource:
            return None
        if self.namespace is not None and event.namespace != self.namespace:
            return None
        new_ok = self._matches(event.obj)
        old_ok = self._matches(event.old)
        kind = event.type
        if kind == "MODIFIED":
            if new_ok and not old_ok:
                kind = "ADDED"
            elif old_ok and not new_ok:
                kind = "DELETED"
            elif not new_ok:
                return None
        elif (kind == "ADDED" and not new_ok) or (kind == "DELETED" and not (new_ok or old_ok)):
            return None
        return {"type": kind, "object": copy.deepcopy(event.obj)}


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    propagation: str = "Background"
    uid: str | None = None
    resource_version: str | None = None


class ObjectStore:
    """All objects of all kinds, with one global resourceVersion counter."""

    def __init__(self, history_limit: int = 1000) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be >= 1")
        self.history_limit = history_limit
        self.resources: dict[tuple[str, str, str], Resource] = {}
        self.objects: dict[ResourceKey, dict[ObjectKey, Obj]] = {}
        self.resource_version = 0
        self.history: deque[HistoryEvent] = deque()
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        for resource in DEFAULT_RESOURCES:
            self.register(resource)
        self.ensure_namespace("default")

    # --- resources --------------------------------------------------------------------

    def register(self, resource: Resource) -> None:
        self.resources[(resource.group, resource.version, resource.plural)] = resource
        self.objects.setdefault((resource.group, resource.plural), {})

    def find(self, group: str, version: str, plural: str) -> Resource:
        found = self.resources.get((group, version, plural))
        if found is None:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        return found

    def group_versions(self) -> dict[str, list[str]]:
        result: dict[str, list[str]] = {}
        for group, version, _ in self.resources:
            versions = result.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return result

    def _bucket(self, resource: Resource) -> dict[ObjectKey, Obj]:
        return self.objects.setdefault((resource.group, resource.plural), {})

    def _resource_of_key(self, key: ResourceKey) -> Resource:
        for (group, _, plural), resource in self.resources.items():
            if (group, plural) == key:
                return resource
        raise KeyError(key)

    # --- commit and watch fan-out -----------------------------------------------------

    def _commit(self, resource: Resource, new: Obj | None, old: Obj | None, event_type: str) -> Obj:
        """Store ``new`` (or delete ``old`` when ``new`` is None) under a fresh resourceVersion."""
        self.resource_version += 1
        rv = self.resource_version
        subject = new if new is not None else copy.deepcopy(old)
        assert subject is not None
        _meta(subject)["resourceVersion"] = str(rv)
        meta = _meta(subject)
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self._bucket(resource)
        if new is None:
            bucket.pop(key, None)
        else:
            bucket[key] = new
        event = HistoryEvent(
            rv, event_type, (resource.group, resource.plural), key[0], copy.deepcopy(subject), old
        )
        self.history.append(event)
        while len(self.history) > self.history_limit:
            dropped = self.history.popleft()
            self.compacted_rv = max(self.compacted_rv, dropped.rv)
        for watcher in list(self.watchers):
            if (message := watcher.wants(event)) is not None:
                watcher.queue.put_nowait(message)
        return subject

    def subscribe(
        self,
        resource: Resource,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
        resource_version: str | None,
        *,
        bookmarks: bool = False,
    ) -> Watcher:
        """Register a watcher and queue what it must see first (ADDED or replayed history).

        ``bookmarks`` (``allowWatchBookmarks``): after the ADDED of a watch without a version,
        a BOOKMARK at the current version annotated ``k8s.io/initial-events-end``, as a real
        server sends it."""
        watcher = Watcher((resource.group, resource.plural), namespace, labels, fields)
        requested = _parse_rv(resource_version)
        if requested is None or requested == 0:
            for obj in self._select(resource, namespace, labels, fields):
                watcher.queue.put_nowait({"type": "ADDED", "object": copy.deepcopy(obj)})
            if bookmarks:
                watcher.queue.put_nowait(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": resource.kind,
                            "apiVersion": resource.api_version,
                            "metadata": {
                                "resourceVersion": str(self.resource_version),
                                "annotations": {INITIAL_EVENTS_END: "true"},
                            },
                        },
                    }
                )
        else:
            if requested < 0:
                raise bad_request(f"invalid resourceVersion {resource_version!r}")
            if requested < self.compacted_rv:
                raise expired(requested, self.compacted_rv)
            for event in self.history:
                if event.rv > requested and (message := watcher.wants(event)) is not None:
                    watcher.queue.put_nowait(message)
        self.watchers.add(watcher)
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def drop_watchers(self, *, abort: bool = False) -> int:
        count = 0
        for watcher in list(self.watchers):
            watcher.abort = abort
            watcher.queue.put_nowait(None)
            self.watchers.discard(watcher)
            count += 1
        return count

    def compact(self, resource_version: int | None = None) -> None:
        """Forget history up to ``resource_version`` (default: now): older versions get 410."""
        target = self.resource_version if resource_version is None else resource_version
        while self.history and self.history[0].rv <= target:
            self.history.popleft()
        self.compacted_rv = max(self.compacted_rv, target)

    # --- reads ------------------------------------------------------------------------

    def _select(
        self,
        resource: Resource,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
    ) -> Iterator[Obj]:
        bucket = self._bucket(resource)
        for key in sorted(bucket):
            obj = bucket[key]
            if namespace is not None and resource.namespaced and key[0] != namespace:
                continue
            if not selector_matches(labels, _meta(obj).get("labels")):
                continue
            if all(f.matches(obj) for f in fields):
                yield obj

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        obj = self._bucket(resource).get((namespace or "", name))
        if obj is None:
            raise not_found(resource, name)
        return copy.deepcopy(obj)

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        labels: tuple[Requirement, ...] = (),
        fields: tuple[FieldRequirement, ...] = (),
    ) -> Obj:
        items = []
        for obj in self._select(resource, namespace, labels, fields):
            item = copy.deepcopy(obj)
            if not resource.is_custom:
                # Like the real server: typed lists carry kind/apiVersion only on the list.
                item.pop("kind", None)
                item.pop("apiVersion", None)
            items.append(item)
        return {
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": items,
        }

    # --- namespaces -------------------------------------------------------------------

    def ensure_namespace(self, name: str) -> None:
        """Namespaces are created on first use (documented difference from a real server)."""
        bucket = self._bucket(NAMESPACE)
        existing = bucket.get(("", name))
        if existing is not None:
            if _meta(existing).get("deletionTimestamp"):
                raise ApiStatus(
                    403,
                    "Forbidden",
                    f"unable to create new content in namespace {name} because it is being "
                    "terminated",
                    {"name": name, "kind": "namespaces"},
                )
            return
        self._commit(
            NAMESPACE, self._stamp_new(NAMESPACE, _namespace_manifest(name)), None, "ADDED"
        )

    # --- create -----------------------------------------------------------------------

    def _stamp_new(self, resource: Resource, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        return obj

    def create(self, resource: Resource, namespace: str | None, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        self._check_type(resource, obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if resource.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if not namespace:
                raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiStatus(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        name = meta.get("name")
        bucket = self._bucket(resource)
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(resource, "", [("metadata.name", "name or generateName is required")])
            for _ in range(16):
                candidate = prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
                if (namespace or "", candidate) not in bucket:
                    break
            name = meta["name"] = candidate
        self._validate(resource, obj, str(name))
        if (namespace or "", name) in bucket:
            raise ApiStatus(
                409,
                "AlreadyExists",
                f'{resource.qualified_plural} "{name}" already exists',
                _details(resource, name),
            )
        if resource.namespaced and namespace:
            self.ensure_namespace(namespace)
        for managed in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(managed, None)
        if resource.has_status and resource is not NAMESPACE:
            obj.pop("status", None)
        obj["kind"] = resource.kind
        obj["apiVersion"] = resource.api_version
        self._stamp_new(resource, obj)
        if resource == CUSTOM_RESOURCE_DEFINITION:
            self._register_crd(obj)
        created = self._commit(resource, obj, None, "ADDED")
        self._collect_garbage()
        return copy.deepcopy(created)

    def _check_type(self, resource: Resource, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind is not None and kind != resource.kind:
            raise bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
            )
        if api_version is not None and api_version != resource.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({resource.api_version})"
            )

    def _validate(self, resource: Resource, obj: Obj, name: str) -> None:
        causes: list[tuple[str, str]] = []
        if resource.group == _RBAC_GROUP:
            if _PATH_SEGMENT_FORBIDDEN.search(name) or name in (".", ".."):
                causes.append(("metadata.name", f"invalid name {name!r}"))
        elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            causes.append(
                (
                    "metadata.name",
                    f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                    "lower case alphanumeric characters, '-' or '.'",
                )
            )
        meta = _meta(obj)
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            causes.append(("metadata.labels", "must be a map of strings"))
            labels = {}
        for key, value in labels.items():
            prefix, _, label_name = str(key).rpartition("/")
            if len(label_name) > 63 or not _LABEL_NAME.match(label_name):
                causes.append((f"metadata.labels[{key}]", "invalid label key"))
            elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
                causes.append((f"metadata.labels[{key}]", "invalid label key prefix"))
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                causes.append(
                    (
                        f"metadata.labels[{key}]",
                        f"Invalid value: {value!r}: must be 63 characters or less and begin and "
                        "end with an alphanumeric character",
                    )
                )
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
            isinstance(v, str) for v in annotations.values()
        ):
            causes.append(("metadata.annotations", "must be a map of strings"))
        finalizers = meta.get("finalizers") or []
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            causes.append(("metadata.finalizers", "must be a list of strings"))
        for index, ref in enumerate(meta.get("ownerReferences") or []):
            if not isinstance(ref, dict) or not all(
                ref.get(k) for k in ("apiVersion", "kind", "name", "uid")
            ):
                causes.append(
                    (f"metadata.ownerReferences[{index}]", "apiVersion, kind, name, uid required")
                )
        if causes:
            raise invalid(resource, name, causes)

    def _register_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
        if not (group and plural and kind):
            raise invalid(
                CUSTOM_RESOURCE_DEFINITION,
                _meta(crd).get("name", ""),
                [("spec", "group, names.plural and names.kind are required")],
            )
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            self.register(
                Resource(
                    group,
                    version["name"],
                    plural,
                    kind,
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    has_status="status" in (version.get("subresources") or {}),
                    singular=names.get("singular", kind.lower()),
                    short_names=tuple(names.get("shortNames") or ()),
                )
            )
        crd["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}
            ],
        }

    # --- update (PUT and PATCH) -------------------------------------------------------

    def replace(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
    ) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_type(resource, body)
        old = self._current(resource, namespace, name, subresource)
        body_meta = _meta(body)
        if body_meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({body_meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        new = copy.deepcopy(body)
        new_meta = new.setdefault("metadata", {})
        if not new_meta.get("resourceVersion"):
            if resource.is_custom:
                raise invalid(
                    resource,
                    name,
                    [("metadata.resourceVersion", "must be specified for an update")],
                )
            new_meta["resourceVersion"] = _meta(old)["resourceVersion"]
        return self._update(resource, old, new, subresource)

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str | None = None,
    ) -> Obj:
        old = self._current(resource, namespace, name, subresource)
        media = content_type.split(";", 1)[0].strip().lower()
        try:
            if media == MERGE_PATCH or (media == STRATEGIC_MERGE_PATCH and not resource.is_custom):
                if not isinstance(patch, dict):
                    raise bad_request("a merge patch must be a JSON object")
                new = merge_patch(old, patch)
            elif media == JSON_PATCH:
                new = json_patch(old, patch)
            else:
                raise ApiStatus(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {JSON_PATCH}, {MERGE_PATCH}"
                    + ("" if resource.is_custom else f", {STRATEGIC_MERGE_PATCH}"),
                )
        except PatchTestFailed as exc:
            raise invalid(resource, name, [("patch", str(exc))]) from None
        except PatchError as exc:
            raise ApiStatus(422, "Invalid", f"the patch could not be applied: {exc}") from None
        if not isinstance(new, dict):
            raise bad_request("the patched object is not a JSON object")
        return self._update(resource, old, new, subresource)

    def _current(
        self, resource: Resource, namespace: str | None, name: str, subresource: str | None
    ) -> Obj:
        if subresource is not None and not (subresource == "status" and resource.has_status):
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        return self.get(resource, namespace, name)

    def _update(self, resource: Resource, old: Obj, new: Obj, subresource: str | None) -> Obj:
        name = _meta(old)["name"]
        current_rv = _meta(old)["resourceVersion"]
        new_meta = new.get("metadata")
        if not isinstance(new_meta, dict):
            raise bad_request("metadata must be a JSON object")
        if str(new_meta.get("resourceVersion", current_rv)) != current_rv:
            raise conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        if subresource == "status":
            # Only .status moves through the status subresource.
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            if resource.has_status:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
        meta = result.setdefault("metadata", {})
        old_meta = _meta(old)
        for managed in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ):
            if managed in old_meta:
                meta[managed] = old_meta[managed]
            else:
                meta.pop(managed, None)
        result["kind"] = resource.kind
        result["apiVersion"] = resource.api_version
        self._validate(resource, result, name)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise invalid(
                    resource,
                    name,
                    [
                        (
                            "metadata.finalizers",
                            "no new finalizers can be added if the object is being deleted",
                        )
                    ],
                )
        if result == old:
            return old  # a no-op write: no new resourceVersion, no watch event
        if _body_sans(result, "metadata", "status") != _body_sans(old, "metadata", "status"):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # As a real server answers the write that removes the last finalizer: the object
            # as patched, at the version it was stored under (the delete is not an update);
            # the DELETED event carries the stored object under the deletion's new version.
            meta.pop("finalizers", None)
            self._commit(resource, None, old, "DELETED")
            self._collect_garbage()
            return copy.deepcopy(result)
        stored = self._commit(resource, result, old, "MODIFIED")
        self._collect_garbage()
        return copy.deepcopy(stored)

    # --- delete and garbage collection ------------------------------------------------

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        options: DeleteOptions,
    ) -> Obj:
        old = self.get(resource, namespace, name)
        meta = _meta(old)
        if options.uid is not None and options.uid != meta.get("uid"):
            raise conflict(
                resource,
                name,
                f"Precondition failed: UID in precondition: {options.uid}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if options.resource_version is not None and options.resource_version != meta.get(
            "resourceVersion"
        ):
            raise conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        if options.propagation not in ("Background", "Foreground", "Orphan"):
            raise bad_request(f"invalid propagationPolicy {options.propagation!r}")
        result = self._delete(resource, old, options.propagation)
        self._collect_garbage()
        return copy.deepcopy(result)

    def _delete(self, resource: Resource, old: Obj, propagation: str) -> Obj:
        meta = _meta(old)
        if propagation == "Orphan":
            self._orphan_dependents(meta.get("uid", ""))
        if meta.get("deletionTimestamp"):
            return old
        new = copy.deepcopy(old)
        new_meta = _meta(new)
        finalizers = list(new_meta.get("finalizers") or [])
        if propagation == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if resource == NAMESPACE:
            new.setdefault("status", {})["phase"] = "Terminating"
        elif not finalizers:
            return self._commit(resource, None, old, "DELETED")
        new_meta["finalizers"] = finalizers
        if not finalizers:
            new_meta.pop("finalizers")
        new_meta["deletionTimestamp"] = _now()
        new_meta["deletionGracePeriodSeconds"] = 0
        new_meta["generation"] = int(new_meta.get("generation", 1)) + 1
        return self._commit(resource, new, old, "MODIFIED")

    def _orphan_dependents(self, owner_uid: str) -> None:
        for resource, obj in list(self._all_objects()):
            refs = _meta(obj).get("ownerReferences") or []
            kept = [ref for ref in refs if ref.get("uid") != owner_uid]
            if len(kept) != len(refs):
                self._rewrite_owner_refs(resource, obj, kept)

    def _rewrite_owner_refs(self, resource: Resource, obj: Obj, refs: builtins.list[Any]) -> None:
        new = copy.deepcopy(obj)
        if refs:
            _meta(new)["ownerReferences"] = copy.deepcopy(refs)
        else:
            _meta(new).pop("ownerReferences", None)
        self._commit(resource, new, obj, "MODIFIED")

    def _all_objects(self) -> Iterator[tuple[Resource, Obj]]:
        for key, bucket in self.objects.items():
            if not bucket:
                continue
            resource = self._resource_of_key(key)
            for obj_key in sorted(bucket):
                yield resource, bucket[obj_key]

    def _collect_garbage(self) -> None:
        """Run the garbage collector to a fixpoint (synchronously, unlike a real cluster)."""
        for _ in range(10_000):
            if not self._gc_pass():
                return
        raise RuntimeError("garbage collection did not converge")

    def _gc_pass(self) -> bool:
        objects = list(self._all_objects())
        by_uid = {_meta(obj).get("uid"): obj for _, obj in objects}
        dependents: dict[str, builtins.list[tuple[Resource, Obj]]] = {}

        def owner_present(ref: Mapping[str, Any], dependent: Obj) -> bool:
            owner = by_uid.get(ref.get("uid"))
            if owner is None:
                return False
            owner_ns = _meta(owner).get("namespace")
            return not owner_ns or owner_ns == _meta(dependent).get("namespace")

        for resource, obj in objects:
            refs = _meta(obj).get("ownerReferences") or []
            if not refs:
                continue
            present = [ref for ref in refs if owner_present(ref, obj)]
            if not present:
                if not _meta(obj).get("deletionTimestamp"):
                    self._delete(resource, obj, "Background")
                    return True
                continue
            if len(present) != len(refs):
                self._rewrite_owner_refs(resource, obj, present)
                return True
            for ref in present:
                dependents.setdefault(str(ref.get("uid")), []).append((resource, obj))

        for resource, obj in objects:
            meta = _meta(obj)
            if not meta.get("deletionTimestamp"):
                continue
            if FOREGROUND_FINALIZER in (meta.get("finalizers") or []):
                children = dependents.get(str(meta.get("uid")), [])
                pending = [c for c in children if not _meta(c[1]).get("deletionTimestamp")]
                for child_resource, child in pending:
                    self._delete(child_resource, child, "Background")
                if pending:
                    return True
                if not children:
                    new = copy.deepcopy(obj)
                    remaining = [f for f in meta["finalizers"] if f != FOREGROUND_FINALIZER]
                    _meta(new)["finalizers"] = remaining
                    self._finish_update(resource, new, obj)
                    return True
            if resource == NAMESPACE:
                name = meta["name"]
                contents = [
                    (res, o)
                    for res, o in objects
                    if res.namespaced and _meta(o).get("namespace") == name
                ]
                pending = [c for c in contents if not _meta(c[1]).get("deletionTimestamp")]
                for child_resource, child in pending:
                    self._delete(child_resource, child, "Background")
                if pending:
                    return True
                if not contents:
                    self._commit(NAMESPACE, None, obj, "DELETED")
                    return True
        return False

    def _finish_update(self, resource: Resource, new: Obj, old: Obj) -> None:
        meta = _meta(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._commit(resource, None, old, "DELETED")
        else:
            self._commit(resource, new, old, "MODIFIED")


def _namespace_manifest(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


# --- fault injection (a scripted admission webhook) ------------------------------------

KUBE_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})


@dataclass(eq=False)
class InjectedError:
    """One scripted refusal: requests matching it get its ``Status`` instead of being served.

    Matching is by Kubernetes verb, ``resource`` (the plural, ``pods``; a subresource as
    ``pods/status``, as admission rules name it), and optionally namespace and name prefix.
    ``times`` limits how many requests fail (``None``: until removed); ``hits`` counts them.
    """

    verb: str
    resource: str
    namespace: str | None
    name_prefix: str | None
    status: int
    reason: str
    message: str
    times: int | None
    hits: int = 0
    removed: bool = False

    def __post_init__(self) -> None:
        if self.verb not in KUBE_VERBS:
            raise ValueError(f"verb must be one of {sorted(KUBE_VERBS)}, not {self.verb!r}")
        if not self.resource or self.resource != self.resource.lower():
            raise ValueError(f"resource must be a lower-case plural like 'pods': {self.resource!r}")
        if not 400 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP error code (400-599), not {self.status}")
        if not self.reason:
            raise ValueError("reason is required (e.g. Forbidden, Invalid)")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1 (or None for always), not {self.times}")

    def remove(self) -> None:
        """Stop refusing (idempotent); requests are served normally again."""
        self.removed = True

    @property
    def exhausted(self) -> bool:
        return self.removed or (self.times is not None and self.hits >= self.times)

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        """Pure: whether a request (``resource`` with ``/subresource`` if any) is refused."""
        if self.exhausted or verb != self.verb or resource != self.resource:
            return False
        if self.namespace is not None and namespace != self.namespace:
            return False
        return self.name_prefix is None or (name or "").startswith(self.name_prefix)

    def error(self, resource: Resource, name: str | None) -> ApiStatus:
        """The ``Status`` a real server answers for an admission refusal of this request."""
        return ApiStatus(self.status, self.reason, self.message, _details(resource, name))
