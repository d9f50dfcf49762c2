"""The emulator's state: objects of every kind, the resourceVersion counter and the writes.

What each write checks is in ``validation``, the watches it feeds in ``watching``, the garbage
collection it triggers in ``garbage``, its error answers in ``status``. No HTTP here: every
operation takes and returns plain dicts and raises :class:`ApiStatus` for the error the real API
server would answer, so the HTTP layer only translates. The event loop is single-threaded and
no method awaits, so each operation (including the garbage collection it triggers) is atomic,
like one etcd transaction per write.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.kube.resources import (
    CUSTOM_RESOURCE_DEFINITION,
    DEFAULT_RESOURCES,
    NAMESPACE,
    Resource,
)
from arcflow.common.kube.selectors import Requirement, selector_matches
from arcflow.devstack.kube_emulator.fields import FieldRequirement
from arcflow.devstack.kube_emulator.garbage import FOREGROUND_FINALIZER, GarbageCollector
from arcflow.devstack.kube_emulator.objects import Obj, ObjectKey, ResourceKey, meta_of, now
from arcflow.devstack.kube_emulator.patching import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
)
from arcflow.devstack.kube_emulator.status import (
    ApiStatus,
    bad_request,
    conflict,
    expired,
    invalid,
    not_found,
    status_details,
)
from arcflow.devstack.kube_emulator.validation import (
    check_type,
    established_status,
    served_resources,
    validate_object,
)
from arcflow.devstack.kube_emulator.watching import HistoryEvent, Watcher

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


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
        self._gc = GarbageCollector(self)
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

    def resource_of_key(self, key: ResourceKey) -> Resource:
        for (group, _, plural), resource in self.resources.items():
            if (group, plural) == key:
                return resource
        raise KeyError(key)

    # --- commit and watch fan-out -----------------------------------------------------

    def commit(self, resource: Resource, new: Obj | None, old: Obj | None, event_type: str) -> Obj:
        """Store ``new`` (or delete ``old`` when ``new`` is None) under a fresh resourceVersion."""
        self.resource_version += 1
        rv = self.resource_version
        subject = new if new is not None else copy.deepcopy(old)
        assert subject is not None
        meta_of(subject)["resourceVersion"] = str(rv)
        meta = meta_of(subject)
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
            if not selector_matches(labels, meta_of(obj).get("labels")):
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
            if meta_of(existing).get("deletionTimestamp"):
                raise ApiStatus(
                    403,
                    "Forbidden",
                    f"unable to create new content in namespace {name} because it is being "
                    "terminated",
                    {"name": name, "kind": "namespaces"},
                )
            return
        self.commit(NAMESPACE, self._stamp_new(NAMESPACE, _namespace_manifest(name)), None, "ADDED")

    # --- create -----------------------------------------------------------------------

    def _stamp_new(self, resource: Resource, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta["generation"] = 1
        return obj

    def create(self, resource: Resource, namespace: str | None, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        check_type(resource, obj)
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
        validate_object(resource, obj, str(name))
        if (namespace or "", name) in bucket:
            raise ApiStatus(
                409,
                "AlreadyExists",
                f'{resource.qualified_plural} "{name}" already exists',
                status_details(resource, name),
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
        created = self.commit(resource, obj, None, "ADDED")
        self._gc.collect()
        return copy.deepcopy(created)

    def _register_crd(self, crd: Obj) -> None:
        for resource in served_resources(crd):
            self.register(resource)
        crd["status"] = established_status(crd)

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
        check_type(resource, body)
        old = self._current(resource, namespace, name, subresource)
        body_meta = meta_of(body)
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
            new_meta["resourceVersion"] = meta_of(old)["resourceVersion"]
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
        name = meta_of(old)["name"]
        current_rv = meta_of(old)["resourceVersion"]
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
        old_meta = meta_of(old)
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
        validate_object(resource, result, name)
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
            self.commit(resource, None, old, "DELETED")
            self._gc.collect()
            return copy.deepcopy(result)
        stored = self.commit(resource, result, old, "MODIFIED")
        self._gc.collect()
        return copy.deepcopy(stored)

    # --- delete ------------------------------------------------

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        options: DeleteOptions,
    ) -> Obj:
        old = self.get(resource, namespace, name)
        meta = meta_of(old)
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
        result = self.mark_deleted(resource, old, options.propagation)
        self._gc.collect()
        return copy.deepcopy(result)

    def mark_deleted(self, resource: Resource, old: Obj, propagation: str) -> Obj:
        """Delete ``old`` as the API does: at once, or marked (finalizers, a namespace)."""
        meta = meta_of(old)
        if propagation == "Orphan":
            self._gc.orphan_dependents(meta.get("uid", ""))
        if meta.get("deletionTimestamp"):
            return old
        new = copy.deepcopy(old)
        new_meta = meta_of(new)
        finalizers = list(new_meta.get("finalizers") or [])
        if propagation == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if resource == NAMESPACE:
            new.setdefault("status", {})["phase"] = "Terminating"
        elif not finalizers:
            return self.commit(resource, None, old, "DELETED")
        new_meta["finalizers"] = finalizers
        if not finalizers:
            new_meta.pop("finalizers")
        new_meta["deletionTimestamp"] = now()
        new_meta["deletionGracePeriodSeconds"] = 0
        new_meta["generation"] = int(new_meta.get("generation", 1)) + 1
        return self.commit(resource, new, old, "MODIFIED")


def _namespace_manifest(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
