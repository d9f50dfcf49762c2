"""Every write to Kubernetes goes through :class:`Writer`, which also publishes the audit event.

``object.written`` (action, kind, namespace, name, why, ars, variant, uid) lands on
``arc.audit.<ns>.<ars>.<variant>``; an auditor subscribes with a wildcard. The event carries
names and reasons only, never an object body, so a Secret's data can never leak into a stream.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nats.js import JetStreamContext

from arcflow.common import subjects
from arcflow.common.cache import ObjectCache
from arcflow.common.events import EventBase, EventKeys, ObjectWritten, RunnerLifecycle, WriteAction
from arcflow.common.kube import ConflictError, KubeClient, NotFoundError
from arcflow.common.nats import publish_event
from arcflow.common.telemetry import redact_text
from arcflow.reconciler.metrics import ReconcilerMetrics

log = logging.getLogger(__name__)
SOURCE = "reconciler"


@dataclass(frozen=True, slots=True)
class Scope:
    """The ARS (and variant) a write belongs to: the audit subject's keys."""

    namespace: str
    ars: str
    variant: str = ""


class Writer:
    """Create, patch and delete through the KubeClient, auditing each successful write."""

    def __init__(
        self,
        kube: KubeClient,
        js: JetStreamContext | None,
        metrics: ReconcilerMetrics,
        *,
        cache: ObjectCache | None = None,
    ) -> None:
        self.kube = kube
        self._js = js
        self._metrics = metrics
        self.published = 0
        # Read-your-writes (ADR 0010): every write's result goes into the cache at once.
        self.cache = cache

    async def _stale(self, kind: str, name: str, namespace: str | None) -> None:
        """A 409 on a conditional write: the cached copy is stale; read that one object."""
        if self.cache is not None:
            await self.cache.refresh(kind, name, namespace or "")

    async def audit(
        self, action: WriteAction, obj: Mapping[str, Any], scope: Scope, why: str
    ) -> None:
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind", ""))
        self._metrics.writes.add(1, {"action": action, "kind": kind})
        event = ObjectWritten(
            source=SOURCE,
            keys=EventKeys(namespace=scope.namespace, ars=scope.ars, variant=scope.variant),
            action=action,
            kind=kind,
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            why=why,
            ars=scope.ars,
            variant=scope.variant,
            uid=meta.get("uid") or None,
        )
        log.info(
            "object %s",
            action,
            # ``name`` is a LogRecord attribute: as an ``extra`` key it makes logging raise
            # KeyError, which failed every write's reconcile into retry backoff.
            extra={
                "kind": kind,
                "object_name": event.name,
                "namespace": event.namespace,
                "why": why,
            },
        )
        await self._publish(event, scope, kind)

    async def lifecycle(
        self,
        runner: Mapping[str, Any],
        scope: Scope,
        *,
        phase: str,
        previous_phase: str | None,
        reason: str = "",
        message: str = "",
    ) -> None:
        """Publish ``runner.lifecycle`` (an EphemeralRunner changed phase) on the audit subject."""
        meta = runner.get("metadata") or {}
        status = runner.get("status") or {}
        event = RunnerLifecycle(
            source=SOURCE,
            keys=EventKeys(namespace=scope.namespace, ars=scope.ars, variant=scope.variant),
            runner_name=str(meta.get("name", "")),
            phase=phase,
            previous_phase=previous_phase or None,
            runner_id=int(status.get("runnerId") or 0) or None,
            job_request_id=int(status.get("jobRequestId") or 0) or None,
            reason=reason,
            message=redact_text(message),
        )
        log.info(
            "runner %s -> %s",
            previous_phase or "-",
            phase,
            extra={"object_name": event.runner_name, "namespace": scope.namespace},
        )
        await self._publish(event, scope, "EphemeralRunner")

    async def _publish(self, event: EventBase, scope: Scope, kind: str) -> None:
        if self._js is None:
            return
        try:
            await publish_event(
                self._js, subjects.audit_subject(scope.namespace, scope.ars, scope.variant), event
            )
            self.published += 1
        except Exception as exc:  # the write happened; a lost audit line must not undo it
            log.warning(
                "could not publish audit event",
                extra={"error": redact_text(f"{type(exc).__name__}: {exc}"), "kind": kind},
            )

    async def create(self, manifest: Mapping[str, Any], scope: Scope, why: str) -> dict[str, Any]:
        created = await self.kube.create(dict(manifest))
        if self.cache is not None:
            self.cache.observe_write(created)
        await self.audit("created", created, scope, why)
        return created

    async def patch(
        self,
        kind: str,
        name: str,
        namespace: str,
        patch: Mapping[str, Any],
        scope: Scope,
        why: str,
    ) -> dict[str, Any]:
        try:
            patched = await self.kube.patch_merge(kind, name, patch, namespace=namespace)
        except ConflictError:
            await self._stale(kind, name, namespace)
            raise
        if self.cache is not None:
            self.cache.observe_write(patched)
        await self.audit("patched", patched, scope, why)
        return patched

    async def patch_status(
        self,
        kind: str,
        name: str,
        namespace: str,
        status: Mapping[str, Any],
        scope: Scope,
        why: str,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        try:
            patched = await self.kube.patch_status(
                kind, name, status, namespace=namespace, resource_version=resource_version
            )
        except ConflictError:
            await self._stale(kind, name, namespace)
            raise
        if self.cache is not None:
            self.cache.observe_write(patched)
        await self.audit("patched", patched, scope, why)
        return patched

    async def delete(
        self,
        obj: Mapping[str, Any],
        scope: Scope,
        why: str,
        *,
        uid: str | None = None,
        unchanged: bool = False,
        grace_period_seconds: int | None = None,
    ) -> bool:
        """Delete ``obj`` (kind/name/namespace from it); ``False`` when it was already gone.

        ``unchanged=True`` deletes only the version that was read (a resourceVersion
        precondition): a decision taken on a stale copy, say "this runner is idle", fails
        with 409 instead of deleting an object that changed since (it became busy).
        """
        meta = obj.get("metadata") or {}
        kind, name, namespace = str(obj["kind"]), str(meta["name"]), meta.get("namespace")
        version = str(meta.get("resourceVersion") or "") if unchanged else ""
        try:
            if grace_period_seconds is None:
                response = await self.kube.delete(
                    kind, name, namespace=namespace, uid=uid, resource_version=version or None
                )
            else:  # a pod whose node is gone (ADR 0065)
                response = await self.kube.delete(
                    kind,
                    name,
                    namespace=namespace,
                    uid=uid,
                    resource_version=version or None,
                    grace_period_seconds=grace_period_seconds,
                )
        except NotFoundError:
            if self.cache is not None:
                self.cache.observe_delete(obj, None)
            return False
        except ConflictError:
            await self._stale(kind, name, namespace)
            raise
        if self.cache is not None:
            self.cache.observe_delete(obj, response)
        await self.audit("deleted", obj, scope, why)
        return True
