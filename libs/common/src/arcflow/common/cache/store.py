"""The in-memory object store behind a watch-fed cache (pure: no I/O, no awaits).

Objects are kept per kind, namespace and name, with two indexes: by owner uid
(``metadata.ownerReferences``) and by label ``key=value``. Every update is **resourceVersion
aware**: an object older than the one held (a late watch event after our own write, a
replayed watch) is ignored, and a deleted object leaves a short-lived *tombstone* so a stale
event cannot bring it back. resourceVersions are compared as integers when both are integers
(the API server's etcd revisions are); otherwise the newest arrival wins (see
``docs/kubernetes.md``, "Watch-fed cache").

The store holds whatever it is given: callers decide what goes in (a Secret's data only in
the memory of the service that needs it, never in a stream or bucket).
"""

from __future__ import annotations

import builtins
import copy
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.kube.selectors import Requirement, selector_matches

Manifest = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace, name)

TOMBSTONE_SECONDS = 60.0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def resource_version_of(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("resourceVersion") or "")


def is_older(candidate: str, held: str) -> bool:
    """True when ``candidate`` is strictly older than ``held`` (integers compared as such)."""
    if not candidate or not held:
        return False
    try:
        return int(candidate) < int(held)
    except ValueError:
        return False  # opaque versions: the newest arrival wins


@dataclass(frozen=True, slots=True)
class Change:
    """What an update did: ``type`` is ADDED, MODIFIED or DELETED; ``obj`` the object."""

    kind: str
    type: str
    obj: Manifest


MANAGED_FIELDS = "managedFields"


def copy_manifest(value: Any) -> Any:
    """A deep copy of a JSON document (what the API server sends): dicts and lists copied,
    strings and numbers shared (immutable); anything else through :func:`copy.deepcopy`.

    Every read of the cache hands out a copy, so a caller's edits never reach the store. A
    burst reads the runners of a set many times (each runner change re-queues its set), and
    ``copy.deepcopy`` (memo table, type dispatch) cost the reconciler about a third of its
    CPU there; this copy gives the same result in about a quarter of the time.
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_manifest(item) for key, item in value.items()}
    if kind is list:
        return [copy_manifest(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def stored_copy(obj: Mapping[str, Any]) -> Manifest:
    """The copy the store keeps: the object without ``metadata.managedFields``.

    Nothing in arcflow reads the server-side-apply bookkeeping, and it is the largest part of
    most objects' metadata (one entry per writer and subresource, with its field set): a
    runner's Pod carries entries of the reconciler, the kubelet and the scheduler. client-go's
    informers drop it the same way (a transform before the store)."""
    stored: Manifest = {}
    for key, value in obj.items():
        if key == "metadata" and type(value) is dict:
            stored[key] = {
                name: copy_manifest(item) for name, item in value.items() if name != MANAGED_FIELDS
            }
        else:
            stored[key] = copy_manifest(value)
    return stored


class KindStore:
    """Objects of one kind, indexed by namespace/name, owner uid and label."""

    def __init__(self, kind: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self._clock = clock
        self._objects: dict[ObjectKey, Manifest] = {}
        self._by_owner: dict[str, set[ObjectKey]] = {}
        self._by_label: dict[tuple[str, str], set[ObjectKey]] = {}
        self._tombstones: dict[ObjectKey, tuple[str, float]] = {}

    def __len__(self) -> int:
        return len(self._objects)

    # --- reads ------------------------------------------------------------------------

    def get(self, namespace: str, name: str, *, shared: bool = False) -> Manifest | None:
        """A copy of the object; ``shared=True``: the stored object itself (see ``list``)."""
        obj = self._objects.get((namespace, name))
        if obj is None or shared:
            return obj
        copied: Manifest = copy_manifest(obj)
        return copied

    def list(
        self,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        selector: Iterable[Requirement] = (),
        owner_uid: str | None = None,
        shared: bool = False,
    ) -> builtins.list[Manifest]:
        """Objects matching every given filter (copies, sorted by namespace/name).

        ``shared=True`` hands out the stored objects themselves, for a caller that only reads
        them (the store never changes a stored object in place: an update replaces it)."""
        keys: set[ObjectKey] | None = None
        if owner_uid is not None:
            keys = set(self._by_owner.get(owner_uid, ()))
        for pair in (labels or {}).items():
            found = self._by_label.get(pair, set())
            keys = set(found) if keys is None else keys & found
        if keys is None:
            keys = set(self._objects)
        requirements = tuple(selector)
        out = []
        for key in sorted(keys):
            if namespace is not None and key[0] != namespace:
                continue
            obj = self._objects[key]
            if requirements and not selector_matches(requirements, _meta(obj).get("labels")):
                continue
            out.append(obj if shared else copy_manifest(obj))
        return out

    def object_keys(self) -> builtins.list[ObjectKey]:
        return sorted(self._objects)

    # --- updates ----------------------------------------------------------------------

    def upsert(self, obj: Mapping[str, Any]) -> Change | None:
        """Store ``obj`` unless an equal or newer version is held (or it was deleted since)."""
        meta = _meta(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not key[1]:
            return None
        version = resource_version_of(obj)
        held = self._objects.get(key)
        if held is not None:
            held_version = resource_version_of(held)
            if version and version == held_version:
                return None
            if is_older(version, held_version):
                return None
        else:
            tomb = self._live_tombstone(key)
            if tomb is not None and (not version or not is_older(tomb, version)):
                return None  # deleted at (or after) this version
        stored = stored_copy(obj)
        self._unindex(key)
        self._objects[key] = stored
        self._tombstones.pop(key, None)
        self._index(key, stored)
        return Change(self.kind, "MODIFIED" if held is not None else "ADDED", stored)

    def remove(self, namespace: str, name: str, resource_version: str = "") -> Change | None:
        """Forget an object and leave a tombstone at ``resource_version`` (or the held one)."""
        key = (namespace, name)
        held = self._objects.get(key)
        if held is not None and is_older(resource_version, resource_version_of(held)):
            return None  # a DELETED older than what we hold: the object was recreated
        version = resource_version or (resource_version_of(held) if held is not None else "")
        if version:
            self._tombstones[key] = (version, self._clock())
            self._prune_tombstones()
        if held is None:
            return None
        self._unindex(key)
        del self._objects[key]
        return Change(self.kind, "DELETED", held)

    def replace_all(
        self, objects: Iterable[Mapping[str, Any]], namespace: str | None = None
    ) -> builtins.list[Change]:
        """A fresh list: store it and remove what it no longer holds (a relist).

        ``namespace``: the list was of that namespace only (one of several list+watches
        feeding this store), so only objects of that namespace can be missing from it."""
        changes: builtins.list[Change] = []
        seen: set[ObjectKey] = set()
        for obj in objects:
            meta = _meta(obj)
            seen.add((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
            change = self.upsert(obj)
            if change is not None:
                changes.append(change)
        gone = [
            k for k in self._objects if k not in seen and (namespace is None or k[0] == namespace)
        ]
        for key in gone:
            held = self._objects[key]
            self._unindex(key)
            del self._objects[key]
            changes.append(Change(self.kind, "DELETED", held))
        return changes

    # --- internals --------------------------------------------------------------------

    def _live_tombstone(self, key: ObjectKey) -> str | None:
        tomb = self._tombstones.get(key)
        if tomb is None:
            return None
        if self._clock() - tomb[1] > TOMBSTONE_SECONDS:
            del self._tombstones[key]
            return None
        return tomb[0]

    def _prune_tombstones(self) -> None:
        if len(self._tombstones) < 1024:
            return
        now = self._clock()
        for key in [k for k, (_, at) in self._tombstones.items() if now - at > TOMBSTONE_SECONDS]:
            del self._tombstones[key]

    def _index(self, key: ObjectKey, obj: Mapping[str, Any]) -> None:
        meta = _meta(obj)
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("uid"):
                self._by_owner.setdefault(str(ref["uid"]), set()).add(key)
        labels = meta.get("labels")
        if isinstance(labels, Mapping):
            for pair in labels.items():
                self._by_label.setdefault((str(pair[0]), str(pair[1])), set()).add(key)

    def _unindex(self, key: ObjectKey) -> None:
        held = self._objects.get(key)
        if held is None:
            return
        meta = _meta(held)
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("uid"):
                keys = self._by_owner.get(str(ref["uid"]))
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_owner[str(ref["uid"])]
        labels = meta.get("labels")
        if isinstance(labels, Mapping):
            for pair in labels.items():
                label_key = (str(pair[0]), str(pair[1]))
                keys = self._by_label.get(label_key)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_label[label_key]
