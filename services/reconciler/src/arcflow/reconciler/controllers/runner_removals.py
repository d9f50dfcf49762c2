"""Deregistration off the reconcile path, in parallel and bounded (ADR 0101).

A deleted EphemeralRunner whose runner GitHub may still hold keeps its registration finalizer
until the registrar removed the runner. Its pass does not wait for that call: it hands the
removal to :class:`RunnerRemovals` and ends; at most ``concurrency`` calls run at once, and
each one's end re-queues its runner, whose next pass reads the outcome and releases it (or
looks again later when GitHub says the job still runs).

Durable by being level-based: what is pending is not stored anywhere but in the cluster. A
runner that is deleting and still carries the registration finalizer needs a removal; after a
restart the first resync queues every cached runner, and those passes hand their removals in
again. A removal started twice for one runner (a restart between the call and the release) is
answered ``not_found``, and the runner is released.

Every removal call of the reconciler goes through here (ADR 0108): a deleted runner's
finalizer, a done runner that is not deleted yet (``Outdated``, ``Failed``/``InvalidPod``), a
stale registration of the same name, and the orphan scan's GitHub runners. One runner has at
most one call in flight, and the registration finalizer, dropped once the call succeeded,
keeps a second one from being made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from arcflow.common.rpc.registrar import RegistrarRpcClient, RegistrarRpcError
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.keys import Key

log = logging.getLogger(__name__)

#: An outcome the registrar never answers: the call failed (no answer, or an error reply).
FAILED = "failed"


@dataclass
class RunnerRemovals:
    """The runner controller's removal calls in flight and their outcomes, in this process."""

    #: Removal calls at once (``ARCFLOW_RECONCILER_REMOVAL_CONCURRENCY``).
    concurrency: int = 16
    #: Queues a runner's key again when its call ended (the work queue's ``add``).
    requeue: Callable[[Key], None] = lambda _key: None
    #: (namespace, runner) -> (runner id, outcome) of a call that ended, until its pass reads it.
    outcomes: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    #: (namespace, runner) of the calls handed in and not ended.
    pending: set[tuple[str, str]] = field(default_factory=set)
    calls: int = 0
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _slots: asyncio.Semaphore | None = None

    def take(self, namespace: str, name: str, runner_id: int) -> str | None:
        """The outcome of the ended call for this runner id (forgotten once taken), or
        ``None`` when there is none yet."""
        found = self.outcomes.get((namespace, name))
        if found is None or found[0] != runner_id:
            return None
        del self.outcomes[(namespace, name)]
        return found[1]

    def forget(self, namespace: str, name: str) -> None:
        """Drop an outcome nobody will take (its runner was released)."""
        self.outcomes.pop((namespace, name), None)

    def submit(
        self,
        registrar: RegistrarRpcClient,
        scope: Scope,
        namespace: str,
        name: str,
        runner_id: int,
        *,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        """Start removing ``runner_id`` unless a call under this key is in flight. Its end
        re-queues ``er/<namespace>/<name>``, whose next pass takes the outcome; or, with
        ``on_end`` (a GitHub runner no EphemeralRunner stands for: the orphan scan), hands the
        outcome to it and keeps nothing."""
        key = (namespace, name)
        if key in self.pending:
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.concurrency))
        self.pending.add(key)
        task = asyncio.create_task(self._remove(registrar, scope, key, runner_id, on_end))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _remove(
        self,
        registrar: RegistrarRpcClient,
        scope: Scope,
        key: tuple[str, str],
        runner_id: int,
        on_end: Callable[[str], None] | None,
    ) -> None:
        assert self._slots is not None
        outcome: str = FAILED
        try:
            async with self._slots:
                self.calls += 1
                outcome = await registrar.remove_runner(scope.namespace, scope.ars, runner_id)
        except RegistrarRpcError as exc:
            log.warning("runner %s/%s: removal call failed: %s", *key, exc)
        finally:
            self.pending.discard(key)
        if on_end is not None:
            on_end(outcome)
            return
        self.outcomes[key] = (runner_id, outcome)
        self.requeue(Key("er", *key))

    async def stop(self) -> None:
        """Cancel the calls in flight (their runners are removed again after a restart)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["FAILED", "RunnerRemovals"]
