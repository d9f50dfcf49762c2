"""Effective runner variants: what each variant really uses after the fallbacks
(docs/upstream-behaviour.md#runner-variants).

Builders, the registrar and the listener config all iterate over the same list, so the
fallback rules live here once. Deliberate difference from the upstream PR
(docs/upstream-behaviour.md#traps): an unset
``maxRunners`` means unbounded (MaxInt32) for *every* variant, never 0.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from arcflow.common.constants import DEFAULT_VARIANT, UNBOUNDED_MAX_RUNNERS


class _VariantFields(Protocol):
    """The fields of one ``RunnerVariant`` the resolution reads."""

    @property
    def name(self) -> str: ...
    @property
    def runner_scale_set_labels(self) -> list[str] | None: ...
    @property
    def template(self) -> dict[str, Any] | None: ...
    @property
    def min_runners(self) -> int | None: ...
    @property
    def max_runners(self) -> int | None: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def drain(self) -> bool | None: ...


class AutoscalingRunnerSetSpec(Protocol):
    """The fields of an ARS spec the resolution reads (``models.AutoscalingRunnerSetSpec``
    provides them; a protocol keeps this module free of an import cycle with that model)."""

    @property
    def runner_scale_set_labels(self) -> list[str] | None: ...
    @property
    def template(self) -> dict[str, Any]: ...
    @property
    def min_runners(self) -> int | None: ...
    @property
    def max_runners(self) -> int | None: ...
    @property
    def runner_variants(self) -> Sequence[_VariantFields] | None: ...
    @property
    def drain(self) -> bool | None: ...


@dataclass(frozen=True)
class EffectiveVariant:
    """One runner scale set to register and scale, with all inherited values resolved."""

    name: str
    runner_scale_set_labels: list[str] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)
    min_runners: int = 0
    max_runners: int = UNBOUNDED_MAX_RUNNERS
    #: Shared-capacity order (ADR 0062): higher first; 0 when unset.
    priority: int = 0
    #: Drained by ``drain`` on the variant or on the whole set.
    drain: bool = False

    @property
    def is_default(self) -> bool:
        """True for the single implicit variant of an ARS without runnerVariants."""
        return self.name == DEFAULT_VARIANT


def is_multi_variant(spec: AutoscalingRunnerSetSpec) -> bool:
    """True when runnerVariants is non-empty; even one named variant takes the fan-out path."""
    return bool(spec.runner_variants)


def effective_variants(spec: AutoscalingRunnerSetSpec) -> list[EffectiveVariant]:
    """Resolve the variants of ``spec`` in declared order.

    Without variants: one default variant (name ``""``) from the top-level fields. With
    variants: labels ``None`` inherit the top-level labels while ``[]`` stays empty; template,
    min and max inherit when unset; min then defaults to 0 and max to MaxInt32. Templates and
    label lists are deep copies, so callers may mutate them freely.
    """
    top_labels = list(spec.runner_scale_set_labels or [])
    top_min = spec.min_runners
    top_max = spec.max_runners
    if not spec.runner_variants:
        return [
            EffectiveVariant(
                name=DEFAULT_VARIANT,
                runner_scale_set_labels=top_labels,
                template=copy.deepcopy(spec.template),
                min_runners=_min_or_default(top_min),
                max_runners=_max_or_default(top_max),
                drain=bool(spec.drain),
            )
        ]
    resolved: list[EffectiveVariant] = []
    for variant in spec.runner_variants:
        labels = (
            list(variant.runner_scale_set_labels)
            if variant.runner_scale_set_labels is not None
            else list(top_labels)
        )
        template = variant.template if variant.template is not None else spec.template
        resolved.append(
            EffectiveVariant(
                name=variant.name,
                runner_scale_set_labels=labels,
                template=copy.deepcopy(template),
                min_runners=_min_or_default(
                    variant.min_runners if variant.min_runners is not None else top_min
                ),
                max_runners=_max_or_default(
                    variant.max_runners if variant.max_runners is not None else top_max
                ),
                priority=variant.priority or 0,
                drain=bool(spec.drain or variant.drain),
            )
        )
    return resolved


def _min_or_default(value: int | None) -> int:
    return 0 if value is None else value


def _max_or_default(value: int | None) -> int:
    return UNBOUNDED_MAX_RUNNERS if value is None else value
