"""List+watch of one kind in one scope (a namespace, or all), turned into published changes.

The loop: load the resume point; list and publish the difference to it; watch from the
list's resourceVersion, publishing each change; when the watch ends, resume from the last
resourceVersion; on 410 Gone (or repeated watch errors) list again and publish what changed
meanwhile, deletions included. Each change is published *before* the cache and the
resourceVersion move past it, so a crash or a broker outage can repeat a change (stored once
thanks to ``Nats-Msg-Id``) but never skip one.

Publishing is pipelined (ADR 0114): up to :data:`PUBLISH_WINDOW` changes of a scope are sent
before their acknowledgements are awaited, in order, so a burst of changes goes out in a few
socket writes instead of one round trip each. The in-memory cache records a change when it
is sent (the next change is computed against it); what is saved as the resume point is only
ever a state whose every change was acknowledged (a checkpoint first waits for the window),
and a change whose publish fails for good is taken back out of the cache before the scope
lists again.

Secrets are listed and watched as metadata only (ADR 0126): the events carry nothing else,
so the server sends no Secret data and this process never holds a JIT configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from arcflow.common.kube import (
    SECRET,
    KubeApiError,
    KubeClient,
    Resource,
    ResourceVersionExpired,
)
from arcflow.watcher.changes import (
    Change,
    KindCache,
    MalformedObjectError,
    ObjectSummary,
    ResumePoint,
    build_event,
    change_for_watch_event,
    diff_listing,
    identity_of,
    resource_version_of,
    resume_key,
    resync_changes,
    subject_for,
    summarize,
)
from arcflow.watcher.metrics import WatcherMetrics
from arcflow.watcher.outbox import RETRYABLE_NATS_ERRORS, Backoff, EventPublisher, ResumeStore

log = logging.getLogger(__name__)

#: After this many watch failures in a row, list again instead of resuming.
RELIST_AFTER_WATCH_ERRORS = 3

#: Changes of one scope sent before the oldest one's acknowledgement is awaited.
PUBLISH_WINDOW = 64


@dataclass(frozen=True, slots=True)
class _Sent:
    """A change sent and not yet settled: what the cache held before it, for taking it back."""

    change: Change
    previous: ObjectSummary | None
    ack: asyncio.Task[bool]
    seen_at: float


class PublishFailedError(Exception):
    """A change could not be published; the cache no longer holds it (the scope re-lists)."""


@dataclass(frozen=True, slots=True)
class WatchScope:
    """One kind in one namespace (``None``: all namespaces), filtered by a label selector."""

    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None

    @property
    def label(self) -> str:
        return f"{self.resource.plural}@{self.namespace or '*'}"

    @property
    def metadata_only(self) -> bool:
        """Secrets are listed and watched as metadata alone (ADR 0126): the watcher never
        receives their data. Other kinds come whole: the API server encodes a whole object
        once for every watcher of it, and converting it for this one costs the server more
        than decoding it here costs the watcher."""
        return self.resource.kind == SECRET.kind


@dataclass(frozen=True, slots=True)
class WatchTiming:
    """Timing knobs of a kind watcher."""

    resync_interval: float = 600.0
    checkpoint_interval: float = 2.0
    watch_timeout: int = 300
    backoff_initial: float = 0.2
    backoff_max: float = 10.0


class KindWatcher:
    """Keeps one scope's objects announced on ``arc.k8s.<resource>.<ns>.<name>``."""

    def __init__(
        self,
        scope: WatchScope,
        kube: KubeClient,
        publisher: EventPublisher,
        store: ResumeStore,
        metrics: WatcherMetrics,
        timing: WatchTiming = WatchTiming(),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scope = scope
        self._kube = kube
        self._publisher = publisher
        self._store = store
        self._metrics = metrics
        self._timing = timing
        self._clock = clock
        self._key = resume_key(scope.resource, scope.namespace)
        self.cache = KindCache.empty()
        #: Set once the first list has been published: the service is ready when all are.
        self.synced = asyncio.Event()
        self._lock = asyncio.Lock()
        self._dirty = False
        self._window: deque[_Sent] = deque()
        #: A publish that failed for good while a checkpoint waited: the watch lists again.
        self._failed: PublishFailedError | None = None

    @property
    def _resource_label(self) -> str:
        return self.scope.resource.plural

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled; saves the resume point on the way out."""
        await self._load_resume_point()
        helpers = [
            asyncio.create_task(self._checkpoint_loop(), name=f"checkpoint {self.scope.label}"),
            asyncio.create_task(self._resync_loop(), name=f"resync {self.scope.label}"),
        ]
        try:
            await self._list_and_watch()
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(2.0):
                    await self._checkpoint()
            for sent in self._window:  # not acknowledged in time: no checkpoint holds them
                sent.ack.cancel()

    async def _list_and_watch(self) -> None:
        backoff = Backoff(self._timing.backoff_initial, self._timing.backoff_max)
        relist_reason: str | None = "initial"
        watch_errors = 0
        while True:
            try:
                if relist_reason is not None:
                    await self._relist(relist_reason)
                    relist_reason = None
                    watch_errors = 0
                    backoff.reset()
                    self.synced.set()
                started = self._clock()
                delivered = await self._watch_once()
                self._metrics.watch_restarted(self._resource_label, "ended")
                if delivered:
                    backoff.reset()
                    watch_errors = 0
                elif self._clock() - started < 1.0:
                    # A watch that ends at once without events: don't spin on the server.
                    await asyncio.sleep(backoff.next_delay())
            except ResourceVersionExpired:
                log.info(
                    "resourceVersion expired (410 Gone): listing again",
                    extra={"scope": self.scope.label},
                )
                self._metrics.watch_restarted(self._resource_label, "expired")
                relist_reason = "expired"
            except KubeApiError as exc:
                watch_errors += 1
                self._metrics.watch_restarted(self._resource_label, "error")
                delay = backoff.next_delay()
                log.warning(
                    "list/watch failed, retrying",
                    extra={
                        "scope": self.scope.label,
                        "status": exc.status,
                        "error": exc.message,
                        "retry_in_seconds": delay,
                    },
                )
                if relist_reason is None and watch_errors >= RELIST_AFTER_WATCH_ERRORS:
                    relist_reason = "errors"
                await asyncio.sleep(delay)
            except Exception:
                # Not an API error we know: keep the scope alive, start over from a list.
                self._metrics.watch_restarted(self._resource_label, "error")
                delay = backoff.next_delay()
                log.exception(
                    "unexpected list/watch failure, listing again",
                    extra={"scope": self.scope.label, "retry_in_seconds": delay},
                )
                relist_reason = relist_reason or "errors"
                await asyncio.sleep(delay)

    async def _relist(self, reason: str) -> None:
        result = await self._kube.list(
            self.scope.resource,
            namespace=self.scope.namespace,
            label_selector=self.scope.label_selector,
            metadata_only=self.scope.metadata_only,
        )
        seen_at = self._clock()
        listed: list[ObjectSummary] = []
        unreadable: set[tuple[str, str]] = set()
        for item in result.items:
            try:
                listed.append(summarize(item))
            except MalformedObjectError as exc:
                self._report_malformed(exc)
                if (identity := identity_of(item)) is not None:
                    unreadable.add(identity)
        for change in diff_listing(self.cache.objects, listed, unreadable):
            await self._publish(change, seen_at)
        async with self._lock:
            await self._settle_all()  # ready only once the list's changes are stored
        self.cache.resource_version = result.resource_version
        self._dirty = True
        self._metrics.relisted(self._resource_label, reason)
        log.info(
            "listed",
            extra={"scope": self.scope.label, "objects": len(listed), "reason": reason},
        )

    async def _watch_once(self) -> int:
        """Watch from the cache's resourceVersion until the server ends the stream."""
        self._raise_if_failed()
        delivered = 0
        stream = self._kube.watch(
            self.scope.resource,
            namespace=self.scope.namespace,
            label_selector=self.scope.label_selector,
            resource_version=self.cache.resource_version,
            timeout_seconds=self._timing.watch_timeout,
            metadata_only=self.scope.metadata_only,
        )
        async with stream:
            async for event in stream:
                delivered += 1
                seen_at = self._clock()
                if event.type == "BOOKMARK":
                    if event.resource_version:
                        self.cache.resource_version = event.resource_version
                    continue
                try:
                    obj = summarize(event.object)
                except MalformedObjectError as exc:
                    self._report_malformed(exc)
                    # Step past it so a resumed watch does not deliver it again.
                    skipped_rv = resource_version_of(event.object)
                    if skipped_rv is not None:
                        self.cache.resource_version = skipped_rv
                    continue
                change = change_for_watch_event(self.cache.objects, event.type, obj)
                if change is not None:
                    await self._publish(change, seen_at)
                self.cache.resource_version = obj.resource_version
                self._dirty = True
        return delivered

    # --- publishing -----------------------------------------------------------------------

    async def _publish(self, change: Change, seen_at: float) -> None:
        """Send one change and record it in the cache; its acknowledgement is awaited in
        order, when the window is full or before a checkpoint (see the module docstring)."""
        event = build_event(self.scope.resource, change)
        async with self._lock:
            self._raise_if_failed()
            while self._window and (
                self._window[0].ack.done() or len(self._window) >= PUBLISH_WINDOW
            ):
                await self._settle_oldest()
            subject = subject_for(self.scope.resource, change.obj)
            # Tasks start in the order they are made, so the changes are sent in order.
            ack = asyncio.create_task(self._publisher.publish(subject, event))
            ack.add_done_callback(self._count_published(change, seen_at))
            previous = self.cache.objects.get(change.obj.uid)
            self.cache.apply(change)
            self._window.append(_Sent(change, previous, ack, seen_at))

    async def _settle_oldest(self) -> None:
        sent = self._window[0]
        try:
            await asyncio.shield(sent.ack)
        except Exception as exc:
            self._take_back()
            raise PublishFailedError(f"publish of a {sent.change.change} change failed") from exc
        self._window.popleft()
        self._dirty = True

    def _count_published(
        self, change: Change, seen_at: float
    ) -> Callable[[asyncio.Task[bool]], None]:
        """Counted when its acknowledgement arrives, not when the window next settles."""

        def count(ack: asyncio.Task[bool]) -> None:
            if not ack.cancelled() and ack.exception() is None:
                self._metrics.published(
                    self._resource_label, change.change, self._clock() - seen_at
                )

        return count

    def _raise_if_failed(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    async def _settle_all(self) -> None:
        while self._window:
            await self._settle_oldest()

    def _take_back(self) -> None:
        """Undo every unsettled change in the cache, newest first, so that the list which
        follows announces them again; their publishes still in flight are cancelled."""
        while self._window:
            sent = self._window.pop()
            sent.ack.cancel()
            if sent.previous is None:
                self.cache.objects.pop(sent.change.obj.uid, None)
            else:
                self.cache.objects[sent.change.obj.uid] = sent.previous

    def _report_malformed(self, exc: MalformedObjectError) -> None:
        self._metrics.malformed(self._resource_label)
        log.error(
            "malformed object skipped",
            extra={"scope": self.scope.label, "reason": str(exc)},
        )

    # --- resync ---------------------------------------------------------------------------

    async def resync_once(self) -> int:
        """Publish one RESYNC event per cached object; returns how many were published.

        Each RESYNC event gets a fresh event id (its ``Nats-Msg-Id``), so every round is
        stored, while the retries of one publish share it.
        """
        published = 0
        for change in resync_changes(self.cache.objects):
            seen_at = self._clock()
            async with self._lock:
                current = self.cache.objects.get(change.obj.uid)
                if current is None or current.resource_version != change.obj.resource_version:
                    continue  # changed meanwhile: the watch announced it
                await self._publisher.publish(
                    subject_for(self.scope.resource, change.obj),
                    build_event(self.scope.resource, change),
                )
            published += 1
            self._metrics.published(self._resource_label, "RESYNC", self._clock() - seen_at)
        return published

    async def _resync_loop(self) -> None:
        interval = self._timing.resync_interval
        if interval <= 0:
            return
        await self.synced.wait()
        while True:
            await asyncio.sleep(interval)
            await self.resync_once()

    # --- resume points --------------------------------------------------------------------

    async def _load_resume_point(self) -> None:
        backoff = Backoff(self._timing.backoff_initial, self._timing.backoff_max)
        while True:
            try:
                point = await self._store.load(self._key)
                break
            except RETRYABLE_NATS_ERRORS as exc:
                delay = backoff.next_delay()
                log.warning(
                    "cannot read resume point, retrying",
                    extra={"key": self._key, "error": type(exc).__name__},
                )
                await asyncio.sleep(delay)
        if point is not None:
            self.cache = point.to_cache()
            log.info(
                "resuming from saved point",
                extra={"scope": self.scope.label, "objects": len(self.cache.objects)},
            )

    async def _checkpoint(self) -> None:
        async with self._lock:
            try:
                await self._settle_all()  # only acknowledged changes go into a resume point
            except PublishFailedError as failed:
                self._failed = failed  # taken back; the watch raises it and lists again
                return
            if not self._dirty:
                return
            self._dirty = False
            point = ResumePoint.of(self.cache)
        try:
            await self._store.save(self._key, point)
        except RETRYABLE_NATS_ERRORS as exc:
            self._dirty = True
            log.warning(
                "cannot save resume point, will retry",
                extra={"key": self._key, "error": type(exc).__name__},
            )

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self._timing.checkpoint_interval)
            await self._checkpoint()
