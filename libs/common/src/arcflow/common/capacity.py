"""A set's shared capacity, priorities and drains as its listener serves them (ADR 0062).

Pure. The reconciler builds a :class:`SetCapacity` from the AutoscalingRunnerSet (effective
variants, each runner pod's effective request), writes it on the AutoscalingListener as the
``arcflow.io/listener-capacity`` annotation and into the listener's ``config.json`` as the
``capacity`` key; the listener reads it back. A set that sets none of ``capacity``,
``priority`` and ``drain`` gets no annotation and no key, so its listener and config stay
byte-identical to what they were before these fields existed.

The listener reports back through the ``arcflow.io/capacity-share`` annotation on each
variant's EphemeralRunnerSet (:class:`ShareReport`), merged into the replica patch it already
sends; the reconciler lifts those into ``status.capacity`` of the ARS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from arcflow.common.quantity import QuantityError, non_negative_quantity, parse_quantity


class CapacityFormatError(ValueError):
    """An annotation or config value is not a capacity document (the reason, no input)."""


@dataclass(frozen=True)
class VariantCapacity:
    """One variant as the allocation sees it (keyed by its EphemeralRunnerSet name)."""

    priority: int = 0
    drain: bool = False
    #: Effective request of one runner pod, as quantity strings.
    pod_request: dict[str, str] = field(default_factory=dict)

    def request_amounts(self) -> dict[str, Fraction]:
        return {k: parse_quantity(v) for k, v in self.pod_request.items()}


@dataclass(frozen=True)
class SetCapacity:
    """The whole set: its budget (``None`` and ``{}``: unbounded) and every variant."""

    max_runners: int | None = None
    resources: dict[str, str] = field(default_factory=dict)
    variants: dict[str, VariantCapacity] = field(default_factory=dict)

    @property
    def bounded(self) -> bool:
        return self.max_runners is not None or bool(self.resources)

    def resource_amounts(self) -> dict[str, Fraction]:
        return {k: non_negative_quantity(v) for k, v in self.resources.items()}

    def variant(self, ers_name: str) -> VariantCapacity:
        return self.variants.get(ers_name, VariantCapacity())

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_runners is not None:
            out["maxRunners"] = self.max_runners
        if self.resources:
            out["resources"] = dict(sorted(self.resources.items()))
        out["variants"] = {
            name: {
                "priority": v.priority,
                "drain": v.drain,
                "podRequest": dict(sorted(v.pod_request.items())),
            }
            for name, v in self.variants.items()
        }
        return out

    def encode(self) -> str:
        return json.dumps(self.to_json_dict(), separators=(",", ":"), sort_keys=False)

    @classmethod
    def from_json_dict(cls, raw: Any) -> SetCapacity:
        if not isinstance(raw, Mapping):
            raise CapacityFormatError("capacity must be a JSON object")
        max_runners = raw.get("maxRunners")
        if max_runners is not None and (
            isinstance(max_runners, bool) or not isinstance(max_runners, int) or max_runners < 0
        ):
            raise CapacityFormatError("capacity.maxRunners must be an integer >= 0")
        resources = raw.get("resources") or {}
        variants = raw.get("variants") or {}
        if not isinstance(resources, Mapping) or not isinstance(variants, Mapping):
            raise CapacityFormatError("capacity.resources and capacity.variants must be objects")
        try:
            for value in resources.values():
                non_negative_quantity(value)
            parsed = {
                str(name): VariantCapacity(
                    priority=int(v.get("priority") or 0),
                    drain=bool(v.get("drain")),
                    pod_request={
                        str(k): str(q)
                        for k, q in (v.get("podRequest") or {}).items()
                        if parse_quantity(q) is not None
                    },
                )
                for name, v in variants.items()
            }
        except (QuantityError, AttributeError, TypeError, ValueError) as exc:
            raise CapacityFormatError(f"capacity is malformed: {exc}") from None
        return cls(
            max_runners=max_runners,
            resources={str(k): str(v) for k, v in resources.items()},
            variants=parsed,
        )

    @classmethod
    def decode(cls, text: str) -> SetCapacity:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CapacityFormatError(f"capacity is not valid JSON: {exc.msg}") from None
        return cls.from_json_dict(raw)


@dataclass(frozen=True)
class ShareReport:
    """A variant's part of the allocation, as its listener last computed it."""

    share: int
    advertised: int
    drain: bool = False
    #: Per budget key ("runners", "cpu", ...): what all shares use of it, and the total.
    used: dict[str, str] = field(default_factory=dict)
    total: dict[str, str] = field(default_factory=dict)

    def encode(self) -> str:
        return json.dumps(
            {
                "share": self.share,
                "advertised": self.advertised,
                "drain": self.drain,
                "used": self.used,
                "total": self.total,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def decode(cls, text: str) -> ShareReport | None:
        """The report, or ``None`` for anything that is not one (never raises)."""
        try:
            raw = json.loads(text)
            return cls(
                share=int(raw["share"]),
                advertised=int(raw["advertised"]),
                drain=bool(raw.get("drain")),
                used={str(k): str(v) for k, v in (raw.get("used") or {}).items()},
                total={str(k): str(v) for k, v in (raw.get("total") or {}).items()},
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
