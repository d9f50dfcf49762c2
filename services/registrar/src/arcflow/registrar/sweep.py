"""The periodic sweep: enqueue every ARS the cluster (the managed namespaces, when set) or
the ``scalesets`` bucket knows of.

Catches what events cannot: a removal waiting on runners whose last ERS event was missed, an
event lost while the registrar was down, registrations of an ARS deleted meanwhile. A sweep's
passes also ask GitHub, at most every ``verify_interval_seconds``, whether each registered
scale set still exists (ADR 0064). Plans are mostly KEEP, which costs no Actions call; keys
already queued coalesce.
"""

from __future__ import annotations

from arcflow.common.cache.store import resource_version_of
from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.registrar.context import RegistrarContext


async def sweep(ctx: RegistrarContext) -> int:
    """Enqueue every known ARS; returns how many."""
    versions: dict[tuple[str, str], str] = {}
    scopes: tuple[str | None, ...] = ctx.namespaces or (None,)
    for scope in scopes:
        listed = await ctx.reads.kube.list(AUTOSCALING_RUNNER_SET, namespace=scope)
        for item in listed.items:
            meta = item.get("metadata") or {}
            if meta.get("namespace") and meta.get("name"):
                versions[(str(meta["namespace"]), str(meta["name"]))] = resource_version_of(item)
    keys = set(versions)
    for record in await ctx.records.load():
        if ctx.namespaces and record.namespace not in ctx.namespaces:
            continue  # not ours to read in a namespace-scoped install
        keys.add((record.namespace, record.ars))
    for namespace, name in sorted(keys):
        ctx.enqueue(
            namespace,
            name,
            trigger="sweep",
            seen_version=versions.get((namespace, name), ""),
            verify=True,
        )
    return len(keys)
