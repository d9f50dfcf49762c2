"""The budget a set takes from its namespace's ResourceQuotas (pure; ADR 0062,
docs/models.md#capacity).

With ``spec.capacity.fromResourceQuota: true`` each ResourceQuota of the set's namespace
bounds the budget by its hard limits: ``pods`` bounds ``maxRunners``; ``requests.<name>``
(and the bare ``cpu``/``memory``, which Kubernetes counts as requests) bounds the total of
``<name>``. Where several quotas or an explicit ``capacity`` value name the same key, the
smallest wins. The hard limit itself is taken, not what is left of it: pods that are not this
set's runners are not subtracted (a documented simplification).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from arcflow.common.models import AutoscalingRunnerSet, ResourceQuota
from arcflow.common.quantity import QuantityError, format_quantity, non_negative_quantity

_REQUESTS_PREFIX = "requests."
#: Bare quota keys that Kubernetes counts as requests.
_BARE_REQUESTS = ("cpu", "memory", "ephemeral-storage")


def uses_resource_quota(ars: AutoscalingRunnerSet) -> bool:
    capacity = ars.spec.capacity
    return capacity is not None and bool(capacity.from_resource_quota)


def quota_limits(quotas: Iterable[ResourceQuota]) -> tuple[int | None, dict[str, Fraction]]:
    """The tightest ``pods`` and per-resource request limit over ``quotas``' ``spec.hard``.
    An unparsable quantity is skipped (the API server validates them anyway)."""
    pods: int | None = None
    resources: dict[str, Fraction] = {}
    for quota in quotas:
        for key, raw in (quota.spec.hard or {}).items():
            try:
                amount = non_negative_quantity(raw)
            except QuantityError:
                continue
            name = str(key)
            if name == "pods":
                whole = int(amount)  # a whole number of pods; floor
                pods = whole if pods is None else min(pods, whole)
                continue
            if name.startswith(_REQUESTS_PREFIX):
                name = name[len(_REQUESTS_PREFIX) :]
            elif name not in _BARE_REQUESTS:
                continue  # limits.*, counts of objects, storage classes: not a pod request
            resources[name] = min(resources.get(name, amount), amount)
    return pods, resources


def with_quota_budget(
    ars: AutoscalingRunnerSet, quotas: Iterable[ResourceQuota]
) -> AutoscalingRunnerSet:
    """``ars`` with its ``capacity`` narrowed by ``quotas``; ``ars`` itself when it does not
    set ``fromResourceQuota``. An explicit ``maxRunners``/``resources`` value and a quota's
    limit on the same key combine by the minimum."""
    capacity = ars.spec.capacity
    if capacity is None or not capacity.from_resource_quota:
        return ars
    pods, limits = quota_limits(quotas)
    max_runners = capacity.max_runners
    if pods is not None:
        max_runners = pods if max_runners is None else min(max_runners, pods)
    resources: dict[str, str] = {str(k): str(v) for k, v in (capacity.resources or {}).items()}
    for name, limit in limits.items():
        explicit = resources.get(name)
        if explicit is not None:
            try:
                if non_negative_quantity(explicit) <= limit:
                    continue
            except QuantityError:
                continue  # the spec's own error is reported by its validation
        resources[name] = format_quantity(limit)
    narrowed = capacity.model_copy(
        update={"max_runners": max_runners, "resources": dict(sorted(resources.items())) or None}
    )
    spec = ars.spec.model_copy(update={"capacity": narrowed})
    return ars.model_copy(update={"spec": spec})
