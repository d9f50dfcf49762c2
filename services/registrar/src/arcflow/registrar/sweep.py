"""The periodic sweep: enqueue every ARS the cluster (the managed namespaces, when set) or
the ``scalesets`` bucket knows of, unless it is settled.

Catches what events cannot: a removal waiting on runners whose last ERS event was missed, an
event lost while the registrar was down, registrations of an ARS deleted meanwhile. A sweep's
passes also ask GitHub, at most every ``verify_interval_seconds``, whether each registered
scale set still exists (ADR 0064).

A settled ARS is not enqueued (ADR 0120): the ARS as just listed, planned against the
registrations the live KV watch holds (the JIT lookup's), would call nothing and write
nothing, no GitHub check is due and none is cued. A pass reads the bucket and takes the
ARS's lock; a settled fleet's sweep now costs one list and no NATS request. Without a live
watch every ARS is enqueued, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arcflow.common.cache.store import resource_version_of
from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.common.models import AutoscalingRunnerSet, InvalidManifestError
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.registrar.context import RegistrarContext
from arcflow.registrar.planning import is_settled, registration_of, sessions_say_not_found

#: Registrations by (namespace, ARS), then by variant.
Records = Mapping[tuple[str, str], Mapping[str, ScaleSetRecord]]


async def sweep(ctx: RegistrarContext, live_records: Records | None = None) -> int:
    """Enqueue every known ARS that is not settled; returns how many were enqueued.

    ``live_records`` is the live watch's view of the bucket (``None``: not live, so every
    ARS is enqueued and the keys come from one read of the bucket)."""
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    scopes: tuple[str | None, ...] = ctx.namespaces or (None,)
    for scope in scopes:
        listed = await ctx.reads.kube.list(AUTOSCALING_RUNNER_SET, namespace=scope)
        for item in listed.items:
            meta = item.get("metadata") or {}
            if meta.get("namespace") and meta.get("name"):
                docs[(str(meta["namespace"]), str(meta["name"]))] = item
    keys = set(docs)
    if live_records is None:
        keys.update((r.namespace, r.ars) for r in await ctx.records.load())
    else:
        keys.update(live_records)
    if ctx.namespaces:  # not ours to read in a namespace-scoped install
        keys = {key for key in keys if key[0] in ctx.namespaces}
    enqueued = 0
    for namespace, name in sorted(keys):
        doc = docs.get((namespace, name))
        if live_records is not None:
            try:
                ars = registration_of(doc).ars if doc is not None else None
            except InvalidManifestError:
                pass  # not settled: its pass reports it
            else:
                if settled(ctx, namespace, name, ars, live_records.get((namespace, name), {})):
                    ctx.metrics.sweep_settled.add(1)
                    continue
        ctx.enqueue(
            namespace,
            name,
            trigger="sweep",
            seen_version=resource_version_of(doc) if doc is not None else "",
            verify=True,
        )
        enqueued += 1
    return enqueued


def settled(
    ctx: RegistrarContext,
    namespace: str,
    name: str,
    ars: AutoscalingRunnerSet | None,
    records: Mapping[str, ScaleSetRecord],
) -> bool:
    """Whether a sweep pass for this (valid) ARS would do nothing: no GitHub check due or
    cued, no scale set marked gone, and a plan of current registrations only."""
    if ctx.gone.verify_due(namespace, name) or ctx.gone.marked(namespace, name):
        return False
    if sessions_say_not_found(ars) and ctx.gone.cue_due(namespace, name):
        return False
    return is_settled(ars, records)
