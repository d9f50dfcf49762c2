"""The orphan scan's I/O (ADR 0065; the rules are in :mod:`.orphan_rules`).

Every ``orphan_scan_seconds``, per scale set the cache's EphemeralRunnerSets name: the registrar
lists GitHub's runners of that set; orphans confirmed over two scans are removed: GitHub
runners through the bounded removal pool (ADR 0108; the counts say what was handed in),
EphemeralRunners with a delete whose finalizer then makes the one removal call. Reads only the
cache and one list call per ARS, which answers all its scale sets (ADR 0121).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from arcflow.common.constants import (
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.kube import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from arcflow.common.models import EphemeralRunner, EphemeralRunnerSet, InvalidManifestError
from arcflow.common.rpc.registrar import RegistrarRpcError
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.manifest import Manifest
from arcflow.reconciler.controllers.orphan_rules import (
    GitHubRunner,
    KubeRunner,
    Suspects,
    gone_from_github,
    orphaned_on_github,
)
from arcflow.reconciler.controllers.runner_removals import RunnerRemovals

log = logging.getLogger(__name__)


def _kube_runner(er: EphemeralRunner) -> KubeRunner:
    status = er.status
    return KubeRunner(
        name=er.name,
        runner_id=status.runner_id if status else 0,
        has_job=bool(status and (status.job_id or status.job_request_id)),
        deleting=er.is_deleting,
    )


async def scan_orphans(ctx: Context, suspects: Suspects) -> dict[str, int]:
    """One scan over every scale set with runners in the cache; counts of what was removed."""
    if ctx.cache is None or ctx.registrar is None:
        return {}
    # The scale sets: one per EphemeralRunnerSet (its runners may all be gone).
    # By ARS (one listing per ARS answers all its scale sets, ADR 0121), then by scale set id.
    sets: dict[tuple[str, str], dict[int, tuple[str, str]]] = {}
    for doc in ctx.cache.list(EPHEMERAL_RUNNER_SET, None, shared=True):
        try:
            runner_set = EphemeralRunnerSet.from_observed(doc)
        except InvalidManifestError:
            continue  # its own pass reports it (ADR 0050)
        labels = runner_set.labels
        scale_set_id = runner_set.spec.ephemeral_runner_spec.runner_scale_set_id
        ars = labels.get(LABEL_SCALE_SET_NAME, "")
        namespace = runner_set.namespace
        scope_namespace = labels.get(LABEL_SCALE_SET_NAMESPACE) or namespace
        if scale_set_id and ars and not runner_set.is_deleting:
            variant = labels.get(LABEL_RUNNER_VARIANT, "")
            sets.setdefault((scope_namespace, ars), {})[scale_set_id] = (namespace, variant)
    removed = {"github_runners": 0, "ephemeral_runners": 0}
    # Every runner is parsed once per scan (ADR 0071: a periodic pass, not the hot path).
    parsed: dict[int, EphemeralRunner | None] = {}
    for (scope_namespace, ars), of_ars in sets.items():
        try:
            all_listed = await ctx.registrar.list_runners(scope_namespace, ars, sorted(of_ars))
        except RegistrarRpcError as exc:
            log.info("orphan scan of %s/%s skipped: %s", scope_namespace, ars, exc)
            continue
        for scale_set_id, (namespace, variant) in of_ars.items():
            listed = [r for r in all_listed if r.runner_scale_set_id == scale_set_id]
            # Read after the call: a runner the cache saw since the listing is not an orphan.
            ers = [
                er
                for er in _parsed(ctx.cache.list(EPHEMERAL_RUNNER, namespace, shared=True), parsed)
                if er.spec.runner_scale_set_id == scale_set_id
            ]
            runners = [_kube_runner(er) for er in ers]
            github = [GitHubRunner(r.id, r.name) for r in listed]
            now = time.monotonic()
            scope_key = f"{namespace}/{ars}/{scale_set_id}"
            scope = Scope(scope_namespace, ars, variant)
            orphans = {str(g.id): g for g in orphaned_on_github(github, runners)}
            removals = ctx.state(RunnerRemovals)
            for key in suspects.confirm(f"gh:{scope_key}", orphans, now):
                # Off the scan, through the bounded pool (ADR 0108); the key cannot name an
                # EphemeralRunner (a name has no "/").
                orphan = orphans[key]
                removals.submit(
                    ctx.registrar,
                    scope,
                    namespace,
                    f"github-runner/{orphan.id}",
                    orphan.id,
                    on_end=_orphan_removed(ctx, suspects, scope_key, orphan, scale_set_id),
                )
                removed["github_runners"] += 1
            by_name = {item.name: item for item in ers}
            gone = {r.name: r for r in gone_from_github(github, runners)}
            for name in suspects.confirm(f"er:{scope_key}", gone, now):
                doomed = by_name[name]
                why = (
                    f"its GitHub runner {gone[name].runner_id} is gone and it runs no job: "
                    "its set makes a fresh one"
                )
                log.warning("EphemeralRunner %s/%s: %s", namespace, name, why)
                await ctx.writer.delete(doomed.manifest, scope, why, unchanged=True)
                suspects.forget(f"er:{scope_key}", name)
                removed["ephemeral_runners"] += 1
    return removed


def _orphan_removed(
    ctx: Context, suspects: Suspects, scope_key: str, orphan: GitHubRunner, scale_set_id: int
) -> Callable[[str], None]:
    """What a GitHub orphan's removal call does when it ends: said, counted; a busy runner
    stays a suspect (the next scan asks again), any other is looked at afresh."""
    namespace, ars, _ = scope_key.split("/")

    def ended(outcome: str) -> None:
        log.warning(
            "GitHub runner %s (id %d) of scale set %d has no EphemeralRunner: remove: %s",
            orphan.name,
            orphan.id,
            scale_set_id,
            outcome,
        )
        if outcome != "job_still_running":
            suspects.forget(f"gh:{scope_key}", str(orphan.id))
        if outcome == "ok":
            ctx.metrics.orphans_removed.add(1, {"namespace": namespace, "name": ars})

    return ended


def _parsed(docs: list[Manifest], memo: dict[int, EphemeralRunner | None]) -> list[EphemeralRunner]:
    """``docs`` parsed, each once per scan (the cache hands out the same shared document, kept
    alive by its model, so its id is its key); one that does not parse is left out (its own
    pass reports it, ADR 0050)."""
    out: list[EphemeralRunner] = []
    for doc in docs:
        if id(doc) not in memo:
            try:
                memo[id(doc)] = EphemeralRunner.from_observed(doc)
            except InvalidManifestError:
                memo[id(doc)] = None
        found = memo[id(doc)]
        if found is not None:
            out.append(found)
    return out


__all__ = ["scan_orphans"]
