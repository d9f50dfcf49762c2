"""The watcher's pure core: object summaries, the per-kind cache and change computation.

Everything here is free of I/O so the rules that decide *what* to publish (which object is
new, changed or gone; which watch event is a replay) are tested on their own. The I/O loop
(:mod:`arcflow.watcher.kind_watcher`) only feeds listings and watch events in and publishes
what comes out.

A summary keeps metadata only (name, namespace, uid, resourceVersion, generation, labels,
ownerReferences, deletionTimestamp): never ``spec``, ``status``, ``data``, ``stringData`` or
annotations, so nothing the watcher caches, persists or publishes can hold a Secret's payload.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arcflow.common import constants
from arcflow.common.events import EventKeys, K8sChange, K8sObjectChanged, OwnerRef
from arcflow.common.kube.resources import Resource
from arcflow.common.subjects import InvalidSubjectTokenError, encode_token, k8s_subject

#: The ``source`` of every event the watcher emits.
SOURCE: Final = "watcher"


class MalformedObjectError(ValueError):
    """An item from the API is not a usable object; the message says why.

    The message names fields and at most the object's namespace/name, never field values,
    so it is safe to log even for a Secret.
    """


class ObjectSummary(BaseModel):
    """What the watcher remembers and announces about one object (metadata only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerRef, ...] = ()
    deletion_timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One change to announce: what happened to which object."""

    change: K8sChange
    obj: ObjectSummary


def _where(metadata: Mapping[str, Any]) -> str:
    namespace = metadata.get("namespace")
    name = metadata.get("name")
    ns_text = namespace if isinstance(namespace, str) and namespace else "?"
    name_text = name if isinstance(name, str) and name else "?"
    return f"{ns_text}/{name_text}"


def _required_str(metadata: Mapping[str, Any], key: str) -> str:
    value = metadata.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedObjectError(
            f"object {_where(metadata)}: metadata.{key} is missing or not a non-empty string"
        )
    return value


def summarize(item: object) -> ObjectSummary:
    """Extract the summary of one API object, or raise :class:`MalformedObjectError`.

    Names and namespaces must also be valid subject tokens, so an object that could not be
    announced on ``arc.k8s.<resource>.<ns>.<name>`` is rejected here with its reason.
    """
    if not isinstance(item, Mapping):
        raise MalformedObjectError(f"item is a {type(item).__name__}, not an object")
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        raise MalformedObjectError("object has no metadata mapping")
    namespace = _required_str(metadata, "namespace")
    name = _required_str(metadata, "name")
    uid = _required_str(metadata, "uid")
    resource_version = _required_str(metadata, "resourceVersion")
    for field, value in (("namespace", namespace), ("name", name)):
        try:
            encode_token(value)
        except InvalidSubjectTokenError:
            raise MalformedObjectError(
                f"object {_where(metadata)}: metadata.{field} cannot be a subject token"
            ) from None
    generation = metadata.get("generation")
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        raise MalformedObjectError(f"object {_where(metadata)}: metadata.generation is not an int")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise MalformedObjectError(
            f"object {_where(metadata)}: metadata.labels is not a string map"
        )
    try:
        owners = tuple(
            OwnerRef(
                api_version=ref["apiVersion"],
                kind=ref["kind"],
                name=ref["name"],
                uid=ref["uid"],
                controller=bool(ref.get("controller", False)),
            )
            for ref in metadata.get("ownerReferences") or ()
        )
        return ObjectSummary(
            namespace=namespace,
            name=name,
            uid=uid,
            resource_version=resource_version,
            generation=generation,
            labels=dict(labels),
            owner_references=owners,
            deletion_timestamp=metadata.get("deletionTimestamp"),
        )
    except (KeyError, TypeError, AttributeError, ValidationError):
        raise MalformedObjectError(
            f"object {_where(metadata)}: metadata.ownerReferences or "
            "metadata.deletionTimestamp is malformed"
        ) from None


def identity_of(item: object) -> tuple[str, str] | None:
    """``(namespace, name)`` of an item if both are readable strings (even if malformed)."""
    if isinstance(item, Mapping):
        metadata = item.get("metadata")
        if isinstance(metadata, Mapping):
            namespace, name = metadata.get("namespace"), metadata.get("name")
            if isinstance(namespace, str) and isinstance(name, str):
                return namespace, name
    return None


def resource_version_of(item: object) -> str | None:
    """The ``metadata.resourceVersion`` of an item if it has one (even if it is malformed)."""
    if isinstance(item, Mapping):
        metadata = item.get("metadata")
        if isinstance(metadata, Mapping):
            value = metadata.get("resourceVersion")
            if isinstance(value, str) and value:
                return value
    return None


@dataclass
class KindCache:
    """The last announced state of every object of one watched kind and scope.

    ``objects`` maps uid to the summary last *published*: it only changes through
    :meth:`apply` after a publish succeeded, so it never runs ahead of the stream.
    ``resource_version`` is where the watch resumes (the list's or the last event's).
    """

    objects: dict[str, ObjectSummary]
    resource_version: str | None = None

    @classmethod
    def empty(cls) -> KindCache:
        return cls(objects={})

    def apply(self, change: Change) -> None:
        """Record a published change."""
        if change.change == "DELETED":
            self.objects.pop(change.obj.uid, None)
        else:
            self.objects[change.obj.uid] = change.obj

    def by_name(self, namespace: str, name: str) -> ObjectSummary | None:
        """The cached object with this namespace/name (uids differ across re-creations)."""
        for obj in self.objects.values():
            if obj.namespace == namespace and obj.name == name:
                return obj
        return None


def diff_listing(
    cached: Mapping[str, ObjectSummary],
    listed: Iterable[ObjectSummary],
    unreadable: Collection[tuple[str, str]] = (),
) -> list[Change]:
    """The changes that turn ``cached`` into ``listed`` (a fresh, complete list).

    Deletions come first (sorted by namespace/name), so an object deleted and re-created
    under the same name during a gap reads as DELETED(old uid) then ADDED(new uid). Objects
    whose resourceVersion did not move produce nothing. ``unreadable`` holds the
    (namespace, name) of listed items that were malformed: they still exist, so a cached
    object with that name is not announced as deleted.
    """
    fresh: dict[str, ObjectSummary] = {}
    for obj in listed:
        fresh[obj.uid] = obj
    deleted = sorted(
        (
            obj
            for uid, obj in cached.items()
            if uid not in fresh and (obj.namespace, obj.name) not in unreadable
        ),
        key=lambda o: (o.namespace, o.name, o.uid),
    )
    changes = [Change("DELETED", obj) for obj in deleted]
    for uid, obj in fresh.items():
        previous = cached.get(uid)
        if previous is None:
            changes.append(Change("ADDED", obj))
        elif previous.resource_version != obj.resource_version:
            changes.append(Change("MODIFIED", obj))
    return changes


def change_for_watch_event(
    cached: Mapping[str, ObjectSummary], event_type: str, obj: ObjectSummary
) -> Change | None:
    """The change to announce for one watch event, or ``None`` for a replay.

    ADDED/MODIFIED are classified against the cache rather than trusted as sent, so a watch
    that replays an object already announced (same uid and resourceVersion) is dropped and a
    change is named the same whether it arrives by watch or by re-list (which keeps the
    ``Nats-Msg-Id`` identical on both paths).
    """
    previous = cached.get(obj.uid)
    if event_type == "DELETED":
        return Change("DELETED", obj)
    if event_type not in ("ADDED", "MODIFIED"):
        raise ValueError(f"not an object watch event type: {event_type!r}")
    if previous is None:
        return Change("ADDED", obj)
    if previous.resource_version == obj.resource_version:
        return None
    return Change("MODIFIED", obj)


def resync_changes(cached: Mapping[str, ObjectSummary]) -> list[Change]:
    """One RESYNC change per cached object, in a stable order."""
    ordered = sorted(cached.values(), key=lambda o: (o.namespace, o.name, o.uid))
    return [Change("RESYNC", obj) for obj in ordered]


def ars_key(resource: Resource, obj: ObjectSummary) -> str | None:
    """The AutoscalingRunnerSet an object belongs to, for the event keys (auditor filters)."""
    if resource.kind == constants.KIND_ARS:
        return obj.name
    return obj.labels.get(constants.LABEL_SCALE_SET_NAME)


def subject_for(resource: Resource, obj: ObjectSummary) -> str:
    """``arc.k8s.<resource>.<ns>.<name>``."""
    return k8s_subject(resource.plural, obj.namespace, obj.name)


def build_event(resource: Resource, change: Change) -> K8sObjectChanged:
    """The ``k8s.object.changed`` event announcing ``change`` (metadata only)."""
    obj = change.obj
    return K8sObjectChanged(
        source=SOURCE,
        keys=EventKeys(namespace=obj.namespace, ars=ars_key(resource, obj)),
        api_version=resource.api_version,
        kind=resource.kind,
        resource=resource.plural,
        namespace=obj.namespace,
        name=obj.name,
        uid=obj.uid,
        change=change.change,
        resource_version=obj.resource_version,
        generation=obj.generation,
        labels=obj.labels,
        owner_references=list(obj.owner_references),
        deletion_timestamp=obj.deletion_timestamp,
    )


def change_msg_id(change: Change, resync_round: str | None = None) -> str:
    """The ``Nats-Msg-Id`` of a change: uid + resourceVersion + change type.

    The same fact published twice (a replayed watch, a re-list after reconnect, a restart
    before the resume point was saved) gets the same id, so JetStream stores it once within
    its duplicate window. RESYNC ids add the round, so every round is stored while a retried
    publish inside one round is not.
    """
    base = f"k8s.object.changed:{change.obj.uid}:{change.obj.resource_version}:{change.change}"
    if change.change == "RESYNC":
        if not resync_round:
            raise ValueError("a RESYNC change needs its round")
        return f"{base}:{resync_round}"
    return base


# --- resume points ------------------------------------------------------------------------


class ResumePoint(BaseModel):
    """What is persisted per watched kind and scope: the resume resourceVersion and the cache.

    Stored compressed in the watcher KV bucket after changes were published, so a restarted
    watcher diffs its first list against it and announces only what changed while it was
    down (deletions included) instead of re-announcing every object.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    version: Literal[1] = 1
    resource_version: str | None = None
    objects: tuple[ObjectSummary, ...] = ()

    @classmethod
    def of(cls, cache: KindCache) -> ResumePoint:
        return cls(
            resource_version=cache.resource_version,
            objects=tuple(sorted(cache.objects.values(), key=lambda o: o.uid)),
        )

    def to_cache(self) -> KindCache:
        return KindCache(
            objects={obj.uid: obj for obj in self.objects},
            resource_version=self.resource_version,
        )

    def encode(self) -> bytes:
        """Compressed JSON (labels repeat a lot, so this shrinks about tenfold)."""
        return zlib.compress(self.model_dump_json(exclude_defaults=True).encode(), level=6)

    @classmethod
    def decode(cls, data: bytes) -> ResumePoint:
        """Inverse of :meth:`encode`; raises ``ValueError`` with the reason if unreadable."""
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise ValueError(f"resume point is not zlib data: {exc}") from None
        try:
            return cls.model_validate_json(raw)
        except ValidationError as exc:
            raise ValueError(
                f"resume point does not validate: {exc.error_count()} errors"
            ) from None


def resume_key(resource: Resource, namespace: str | None) -> str:
    """The KV key of one watched kind and scope: ``<plural>.<namespace or _all>``."""
    # Namespaces are DNS labels (no dots, no underscores), so they are valid KV key parts and
    # cannot collide with "_all".
    scope = "_all" if namespace is None else namespace
    return f"{resource.plural}.{scope}"
