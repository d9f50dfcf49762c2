"""How a converge pass reads the cluster: the ARS from the watch-fed cache when the cache holds
at least the version its trigger saw (ADR 0031), else one GET; the variants that still have
runner sets or runners (a scale set is deleted only once they are gone)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from arcflow.common.cache import ObjectCache
from arcflow.common.cache.store import resource_version_of
from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    KubeClient,
    NotFoundError,
    Resource,
)
from arcflow.common.models import ObjectMeta
from arcflow.registrar.connection import Manifest
from arcflow.registrar.planning import live_variants


def newest_version(first: str, second: str) -> str:
    """The newer of two seen resourceVersions; "" (read the ARS over HTTP) unless both are
    integers, as the API server's are."""
    if first.isdigit() and second.isdigit():
        return first if int(first) >= int(second) else second
    return ""


class ClusterReads:
    """The registrar's Kubernetes reads."""

    def __init__(self, kube: KubeClient, ars_cache: ObjectCache | None = None) -> None:
        self.kube = kube
        #: The watch-fed ARS cache (the JIT lookup's), set once it exists.
        self.ars_cache = ars_cache
        #: ARS reads that went over HTTP (tests and benchmarks read it).
        self.ars_reads = 0

    async def ars(self, namespace: str, name: str, seen_version: str = "") -> Manifest | None:
        """The ARS: from the cache when it holds ``seen_version`` or newer, else one GET."""
        cached = self._cached_ars(namespace, name, seen_version)
        if cached is not None:
            return cached
        self.ars_reads += 1
        return await self.get_or_none(AUTOSCALING_RUNNER_SET, namespace, name)

    def _cached_ars(self, namespace: str, name: str, seen_version: str) -> dict[str, Any] | None:
        """The cached ARS if it is at least as new as the version an event or list saw.

        The cache and the event come over different watches, so the cache may lag the event:
        then (and for an object the cache does not hold, a deletion included) the caller reads
        over HTTP. Versions compare as integers only (the API server's are)."""
        cache = self.ars_cache
        if cache is None or not seen_version.isdigit() or not cache.is_synced:
            return None
        doc = cache.get(AUTOSCALING_RUNNER_SET, name, namespace)
        if doc is None:
            return None
        held = resource_version_of(doc)
        if not held.isdigit() or int(held) < int(seen_version):
            return None
        return doc

    async def get_or_none(self, resource: Resource, namespace: str, name: str) -> Manifest | None:
        try:
            return await self.kube.get(resource, name, namespace)
        except NotFoundError:
            return None

    async def live_variants(self, namespace: str, ars: str, known: Iterable[str]) -> set[str]:
        """Which of ``known`` still have an EphemeralRunnerSet or EphemeralRunner."""
        selector = {LABEL_SCALE_SET_NAME: ars, LABEL_SCALE_SET_NAMESPACE: namespace}
        runner_sets, runners = await asyncio.gather(
            self.kube.list(EPHEMERAL_RUNNER_SET, namespace=namespace, label_selector=selector),
            self.kube.list(EPHEMERAL_RUNNER, namespace=namespace, label_selector=selector),
        )
        # Only the metadata is read: parsed here, at the read (the API server's is well formed).
        sets, ours = (
            [ObjectMeta.model_validate(item.get("metadata") or {}) for item in listed.items]
            for listed in (runner_sets, runners)
        )
        return live_variants(ars, sets, ours, known)
