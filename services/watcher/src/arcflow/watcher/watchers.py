"""The watcher's one component: a kind watcher per kind and scope, started and stopped
together; ready once every first list is published.

It never decides anything: it announces what changed in the cluster and leaves every
decision to the services that consume ``arc.k8s.>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from nats.js import JetStreamContext
from opentelemetry.metrics import Meter

from arcflow.common.kube import ARC_RESOURCES, POD, SECRET, KubeClient, Resource
from arcflow.common.service import Component, ServiceContext
from arcflow.common.tasks import cancel_and_wait, consume_results
from arcflow.watcher.kind_watcher import KindWatcher, WatchScope, WatchTiming
from arcflow.watcher.metrics import WatcherMetrics
from arcflow.watcher.outbox import EventPublisher, ResumeStore
from arcflow.watcher.settings import WatcherSettings

log = logging.getLogger(__name__)

SERVICE_NAME = "watcher"

#: Every resource the watcher watches (the flow-table test compares the reconciler's routing).
WATCHED_RESOURCES = frozenset({r.plural for r in ARC_RESOURCES} | {POD.plural, SECRET.plural})


def watch_scopes(settings: WatcherSettings) -> list[WatchScope]:
    """Every kind and scope to watch: the four ARC kinds unfiltered, Pods and Secrets by label.

    One scope per configured namespace, or one cluster-wide scope per kind when no namespace
    is configured.
    """
    selectors: list[tuple[Resource, str | None]] = [(r, None) for r in ARC_RESOURCES]
    selectors += [(POD, settings.pod_label_selector), (SECRET, settings.secret_label_selector)]
    namespaces: Sequence[str | None] = settings.namespaces or [None]
    return [
        WatchScope(resource, namespace, selector or None)
        for resource, selector in selectors
        for namespace in namespaces
    ]


def timing_of(settings: WatcherSettings) -> WatchTiming:
    return WatchTiming(
        resync_interval=settings.resync_interval_seconds,
        checkpoint_interval=settings.checkpoint_interval_seconds,
        watch_timeout=settings.watch_timeout_seconds,
        backoff_initial=settings.backoff_initial_seconds,
        backoff_max=settings.backoff_max_seconds,
    )


class WatcherService:
    """All kind watchers of one process, plus the health server; run it with :meth:`run`."""

    def __init__(
        self,
        settings: WatcherSettings,
        *,
        kube: KubeClient,
        js: JetStreamContext,
        meter: Meter,
        on_crash: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = WatcherMetrics(meter)
        publisher = EventPublisher(
            js,
            self.metrics,
            timeout=settings.publish_timeout_seconds,
            backoff_initial=settings.backoff_initial_seconds,
            backoff_max=settings.backoff_max_seconds,
        )
        store = ResumeStore(js)
        timing = timing_of(settings)
        self.watchers = [
            KindWatcher(scope, kube, publisher, store, self.metrics, timing)
            for scope in watch_scopes(settings)
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self._on_crash = on_crash

    # --- state ----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Ready once the first list of every kind and scope has been published."""
        return all(w.synced.is_set() for w in self.watchers)

    @property
    def healthy(self) -> bool:
        """Healthy while every kind watcher is still running."""
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

    def details(self) -> dict[str, list[str]]:
        """For ``/readyz``: the kinds and scopes whose first list is not published yet."""
        return {"pending": sorted(w.scope.label for w in self.watchers if not w.synced.is_set())}

    async def wait_ready(self) -> None:
        """Wait until :attr:`ready` (wrap in ``asyncio.timeout``)."""
        await asyncio.gather(*(w.synced.wait() for w in self.watchers))

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every kind watcher in the background."""
        self._tasks = [
            asyncio.create_task(w.run(), name=f"watch {w.scope.label}") for w in self.watchers
        ]
        for task in self._tasks:
            task.add_done_callback(self._crashed)

    def _crashed(self, task: asyncio.Task[None]) -> None:
        """A kind watcher only ends by cancellation; anything else stops the process."""
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("kind watcher crashed", extra={"task": task.get_name()}, exc_info=exc)
            if self._on_crash is not None:
                self._on_crash(RuntimeError(f"{task.get_name()} failed: {exc!r}"))

    async def stop(self) -> None:
        """Cancel the watchers (each saves its resume point)."""
        await cancel_and_wait(self._tasks)
        consume_results(self._tasks)
        self._tasks = []


async def build(ctx: ServiceContext) -> WatcherService:
    return WatcherService(
        ctx.settings, kube=ctx.require_kube(), js=ctx.js, meter=ctx.meter, on_crash=ctx.fatal
    )


def components(ctx: ServiceContext, state: WatcherService) -> Sequence[Component]:
    return [state]
