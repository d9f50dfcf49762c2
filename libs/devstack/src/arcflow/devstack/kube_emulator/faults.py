"""Fault injection: scripted refusals, as an admission webhook would answer them."""

from __future__ import annotations

from dataclasses import dataclass

from arcflow.common.kube.resources import Resource
from arcflow.devstack.kube_emulator.status import ApiStatus, status_details

KUBE_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})


@dataclass(eq=False)
class InjectedError:
    """One scripted refusal: requests matching it get its ``Status`` instead of being served.

    Matching is by Kubernetes verb, ``resource`` (the plural, ``pods``; a subresource as
    ``pods/status``, as admission rules name it), and optionally namespace and name prefix.
    ``times`` limits how many requests fail (``None``: until removed); ``hits`` counts them.
    """

    verb: str
    resource: str
    namespace: str | None
    name_prefix: str | None
    status: int
    reason: str
    message: str
    times: int | None
    hits: int = 0
    removed: bool = False

    def __post_init__(self) -> None:
        if self.verb not in KUBE_VERBS:
            raise ValueError(f"verb must be one of {sorted(KUBE_VERBS)}, not {self.verb!r}")
        if not self.resource or self.resource != self.resource.lower():
            raise ValueError(f"resource must be a lower-case plural like 'pods': {self.resource!r}")
        if not 400 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP error code (400-599), not {self.status}")
        if not self.reason:
            raise ValueError("reason is required (e.g. Forbidden, Invalid)")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1 (or None for always), not {self.times}")

    def remove(self) -> None:
        """Stop refusing (idempotent); requests are served normally again."""
        self.removed = True

    @property
    def exhausted(self) -> bool:
        return self.removed or (self.times is not None and self.hits >= self.times)

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        """Pure: whether a request (``resource`` with ``/subresource`` if any) is refused."""
        if self.exhausted or verb != self.verb or resource != self.resource:
            return False
        if self.namespace is not None and namespace != self.namespace:
            return False
        return self.name_prefix is None or (name or "").startswith(self.name_prefix)

    def error(self, resource: Resource, name: str | None) -> ApiStatus:
        """The ``Status`` a real server answers for an admission refusal of this request."""
        return ApiStatus(self.status, self.reason, self.message, status_details(resource, name))
