"""List+watch of one kind into a :class:`KindStore`, with change callbacks.

Semantics (those of a client-go informer, in our words in ``docs/kubernetes.md``):

* **Start**: list, store the snapshot, mark the informer *synced*, then watch from the list's
  resourceVersion.
* **Watch ends** (server timeout, dropped connection, API server restart): watch again from
  the last resourceVersion seen; the server replays what happened in between.
* **410 Gone** (that version left the server's history) or repeated watch errors: list again;
  the store diffs the new list against what it holds, so objects deleted during the gap
  come out as DELETED.
* **Drift guard**: a full relist every ``relist_seconds`` (0 turns it off), whatever
  happened.
* Every stored change calls ``on_change`` (the reconciler turns it into work-queue keys).

``delay_seconds`` holds every watch event back that long before it reaches the store: tests
use it to play a cache that lags behind the API server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from arcflow.common.cache.store import Change, KindStore
from arcflow.common.kube import KubeClient, Resource, ResourceVersionExpired
from arcflow.common.kube.client import LabelSelector

log = logging.getLogger(__name__)

OnChange = Callable[[Change], None]


class Informer:
    """``start()`` runs the loop in a task; ``await synced()`` waits for the first list."""

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        store: KindStore,
        *,
        namespace: str | None = None,
        label_selector: LabelSelector = None,
        field_selector: str | None = None,
        on_change: OnChange | None = None,
        relist_seconds: float = 900.0,
        watch_timeout_seconds: int = 300,
        backoff_base: float = 0.2,
        backoff_cap: float = 10.0,
        delay_seconds: float = 0.0,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.store = store
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.on_change = on_change
        self.relist_seconds = relist_seconds
        self.watch_timeout_seconds = watch_timeout_seconds
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.delay_seconds = delay_seconds
        self.resource_version: str | None = None
        self.lists = 0
        self.watches = 0
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_list = 0.0

    @property
    def is_synced(self) -> bool:
        return self._synced.is_set()

    def start(self) -> asyncio.Task[None]:
        where = f"-{self.namespace}" if self.namespace else ""
        self._task = asyncio.create_task(
            self._run(), name=f"informer-{self.resource.plural}{where}"
        )
        return self._task

    async def synced(self) -> None:
        await self._synced.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _emit(self, changes: list[Change]) -> None:
        if self.on_change is None:
            return
        for change in changes:
            try:
                self.on_change(change)
            except Exception:  # a broken handler must not stop the cache
                log.exception("cache change handler failed", extra={"kind": change.kind})

    async def relist(self) -> None:
        listed = await self.kube.list(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        self.lists += 1
        self._last_list = time.monotonic()
        self._emit(self.store.replace_all(listed.items, self.namespace))
        self.resource_version = listed.resource_version or None
        self._synced.set()

    def _apply(self, event_type: str, obj: dict[str, Any]) -> None:
        if event_type == "DELETED":
            meta = obj.get("metadata") or {}
            change = self.store.remove(
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                str(meta.get("resourceVersion") or ""),
            )
        else:
            change = self.store.upsert(obj)
        if change is not None:
            self._emit([change])

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                due = self.relist_seconds > 0 and (
                    time.monotonic() - self._last_list >= self.relist_seconds
                )
                if self.resource_version is None or due or failures >= 3:
                    await self.relist()
                    failures = 0
                await self._watch()
                failures = 0
            except asyncio.CancelledError:
                raise
            except ResourceVersionExpired:
                self.resource_version = None
            except Exception as exc:  # any failure: back off and list/watch again
                failures += 1
                delay = min(self.backoff_cap, self.backoff_base * 2 ** min(failures, 10))
                log.warning(
                    "cache watch failed; retrying",
                    extra={
                        "kind": self.resource.kind,
                        "namespace": self.namespace or "",
                        "error": type(exc).__name__,
                    },
                )
                await asyncio.sleep(delay)

    async def _watch(self) -> None:
        timeout = self.watch_timeout_seconds
        if self.relist_seconds > 0:
            left = self.relist_seconds - (time.monotonic() - self._last_list)
            timeout = max(1, min(timeout, int(left) + 1))
        stream = self.kube.watch(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
        )
        self.watches += 1
        async with stream:
            async for event in stream:
                if event.resource_version:
                    self.resource_version = event.resource_version
                if event.type == "BOOKMARK":
                    continue
                if self.delay_seconds > 0:
                    loop = asyncio.get_running_loop()
                    loop.call_later(self.delay_seconds, self._apply, event.type, event.object)
                else:
                    self._apply(event.type, event.object)
