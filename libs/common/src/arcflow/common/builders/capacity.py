"""The listener's view of a set's shared capacity, built from the ARS (pure, ADR 0062)."""

from __future__ import annotations

from arcflow.common.capacity import SetCapacity, VariantCapacity
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.naming import ephemeral_runner_set_name
from arcflow.common.quantity import format_quantity, non_negative_quantity, pod_request


def uses_capacity(ars: AutoscalingRunnerSet) -> bool:
    """True when the set sets ``capacity``, ``drain`` or any variant ``priority``/``drain``."""
    spec = ars.spec
    if spec.capacity is not None or spec.drain:
        return True
    return any(v.priority is not None or v.drain for v in spec.runner_variants or [])


def set_capacity_of(ars: AutoscalingRunnerSet) -> SetCapacity | None:
    """What the listener of ``ars`` must know; ``None`` when the set uses none of it.

    Raises :class:`~arcflow.common.quantity.QuantityError` for an unparsable quantity (the
    validation of the ARS reports it first, with its field path)."""
    if not uses_capacity(ars):
        return None
    capacity = ars.spec.capacity
    resources = {
        str(k): str(v) for k, v in ((capacity.resources if capacity else None) or {}).items()
    }
    for value in resources.values():
        non_negative_quantity(value)
    variants: dict[str, VariantCapacity] = {}
    for variant in ars.spec.effective_variants():
        request = pod_request(variant.template) if resources else {}
        variants[ephemeral_runner_set_name(ars.name, variant.name)] = VariantCapacity(
            priority=variant.priority,
            drain=variant.drain,
            pod_request={
                k: format_quantity(v) for k, v in sorted(request.items()) if k in resources
            },
        )
    return SetCapacity(
        max_runners=capacity.max_runners if capacity is not None else None,
        resources=resources,
        variants=variants,
    )
