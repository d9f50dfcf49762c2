"""The garbage collector a real cluster runs in kube-controller-manager, played synchronously:
owner references, orphaning, foreground deletion and namespace termination (a namespace's
contents deleted first)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from arcflow.common.kube.resources import NAMESPACE, Resource
from arcflow.devstack.kube_emulator.objects import Obj, ObjectKey, ResourceKey, meta_of

FOREGROUND_FINALIZER = "foregroundDeletion"


class Objects(Protocol):
    """What the collector needs of the store: its objects and its two kinds of write."""

    objects: dict[ResourceKey, dict[ObjectKey, Obj]]

    def resource_of_key(self, key: ResourceKey) -> Resource: ...

    def commit(
        self, resource: Resource, new: Obj | None, old: Obj | None, event_type: str
    ) -> Obj: ...

    def mark_deleted(self, resource: Resource, old: Obj, propagation: str) -> Obj: ...


class GarbageCollector:
    """Deletes what lost its owners, to a fixpoint after every write of its store."""

    def __init__(self, store: Objects) -> None:
        self._store = store

    def orphan_dependents(self, owner_uid: str) -> None:
        for resource, obj in list(self._all_objects()):
            refs = meta_of(obj).get("ownerReferences") or []
            kept = [ref for ref in refs if ref.get("uid") != owner_uid]
            if len(kept) != len(refs):
                self._rewrite_owner_refs(resource, obj, kept)

    def _rewrite_owner_refs(self, resource: Resource, obj: Obj, refs: list[Any]) -> None:
        new = copy.deepcopy(obj)
        if refs:
            meta_of(new)["ownerReferences"] = copy.deepcopy(refs)
        else:
            meta_of(new).pop("ownerReferences", None)
        self._store.commit(resource, new, obj, "MODIFIED")

    def _all_objects(self) -> Iterator[tuple[Resource, Obj]]:
        for key, bucket in self._store.objects.items():
            if not bucket:
                continue
            resource = self._store.resource_of_key(key)
            for obj_key in sorted(bucket):
                yield resource, bucket[obj_key]

    def collect(self) -> None:
        """Run the garbage collector to a fixpoint (synchronously, unlike a real cluster)."""
        for _ in range(10_000):
            if not self._pass():
                return
        raise RuntimeError("garbage collection did not converge")

    def _pass(self) -> bool:
        objects = list(self._all_objects())
        by_uid = {meta_of(obj).get("uid"): obj for _, obj in objects}
        dependents: dict[str, list[tuple[Resource, Obj]]] = {}

        def owner_present(ref: Mapping[str, Any], dependent: Obj) -> bool:
            owner = by_uid.get(ref.get("uid"))
            if owner is None:
                return False
            owner_ns = meta_of(owner).get("namespace")
            return not owner_ns or owner_ns == meta_of(dependent).get("namespace")

        for resource, obj in objects:
            refs = meta_of(obj).get("ownerReferences") or []
            if not refs:
                continue
            present = [ref for ref in refs if owner_present(ref, obj)]
            if not present:
                if not meta_of(obj).get("deletionTimestamp"):
                    self._store.mark_deleted(resource, obj, "Background")
                    return True
                continue
            if len(present) != len(refs):
                self._rewrite_owner_refs(resource, obj, present)
                return True
            for ref in present:
                dependents.setdefault(str(ref.get("uid")), []).append((resource, obj))

        for resource, obj in objects:
            meta = meta_of(obj)
            if not meta.get("deletionTimestamp"):
                continue
            if FOREGROUND_FINALIZER in (meta.get("finalizers") or []):
                children = dependents.get(str(meta.get("uid")), [])
                pending = [c for c in children if not meta_of(c[1]).get("deletionTimestamp")]
                for child_resource, child in pending:
                    self._store.mark_deleted(child_resource, child, "Background")
                if pending:
                    return True
                if not children:
                    new = copy.deepcopy(obj)
                    remaining = [f for f in meta["finalizers"] if f != FOREGROUND_FINALIZER]
                    meta_of(new)["finalizers"] = remaining
                    self._finish_update(resource, new, obj)
                    return True
            if resource == NAMESPACE:
                name = meta["name"]
                contents = [
                    (res, o)
                    for res, o in objects
                    if res.namespaced and meta_of(o).get("namespace") == name
                ]
                pending = [c for c in contents if not meta_of(c[1]).get("deletionTimestamp")]
                for child_resource, child in pending:
                    self._store.mark_deleted(child_resource, child, "Background")
                if pending:
                    return True
                if not contents:
                    self._store.commit(NAMESPACE, None, obj, "DELETED")
                    return True
        return False

    def _finish_update(self, resource: Resource, new: Obj, old: Obj) -> None:
        meta = meta_of(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._store.commit(resource, None, old, "DELETED")
        else:
            self._store.commit(resource, new, old, "MODIFIED")
