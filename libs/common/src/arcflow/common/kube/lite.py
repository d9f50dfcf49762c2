"""Kubernetes client settings read without pydantic-settings, for the light listener process.

The listener sends through the same :class:`~arcflow.common.kube.client.KubeClient` as every
other process (one transport on httpx, ADR 0113); only its settings come from here, so it does
without pydantic-settings (ADR 0016). :class:`LiteKubeSettings` reads the ``ARCFLOW_KUBE_*``
variables ``KubeSettings`` reads, with the same names and defaults (a test compares the two).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class LiteSettings(Protocol):
    """What :meth:`KubeClient.from_settings` reads (``KubeSettings`` and
    :class:`LiteKubeSettings` fit)."""

    @property
    def kubeconfig(self) -> str | None: ...
    @property
    def context(self) -> str | None: ...
    @property
    def in_cluster(self) -> bool: ...
    @property
    def qps(self) -> float: ...
    @property
    def burst(self) -> int: ...
    @property
    def request_timeout(self) -> float: ...


_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f", ""})


@dataclass(frozen=True)
class LiteKubeSettings:
    """``KubeSettings``' fields and ``ARCFLOW_KUBE_*`` variables, read without pydantic-settings
    (same names and defaults; ``tests`` compare the two)."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    qps: float = 20.0
    burst: int = 40
    request_timeout: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LiteKubeSettings:
        """Raises ``ValueError`` naming the variable (never its value) when one is invalid."""
        env = os.environ if environ is None else environ
        prefix = "ARCFLOW_KUBE_"

        def get(name: str) -> str | None:
            value = env.get(prefix + name.upper())
            return value if value is None else value.strip()

        def number(name: str, kind: type[float] | type[int], default: float) -> float:
            raw = get(name)
            try:
                value = default if raw is None else kind(raw)
            except ValueError:
                raise ValueError(f"{prefix}{name.upper()} must be a number") from None
            minimum_ok = value >= 1 if kind is int else value > 0
            if not minimum_ok:
                raise ValueError(f"{prefix}{name.upper()} is out of range")
            return value

        in_cluster = (get("in_cluster") or "false").lower()
        if in_cluster not in _TRUE | _FALSE:
            raise ValueError(f"{prefix}IN_CLUSTER must be a boolean")
        return cls(
            kubeconfig=get("kubeconfig") or None,
            context=get("context") or None,
            in_cluster=in_cluster in _TRUE,
            qps=float(number("qps", float, cls.qps)),
            burst=int(number("burst", int, cls.burst)),
            request_timeout=float(number("request_timeout", float, cls.request_timeout)),
        )
