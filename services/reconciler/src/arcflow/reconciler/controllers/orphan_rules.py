"""Pure rules of the orphan scan (ADR 0065, docs/reconciler.md#orphan-runners).

Two mismatches between GitHub and Kubernetes, each found by comparing one scale set's runner
list (the registrar's ``list-runners``) with the EphemeralRunners the cache holds:

* a **GitHub runner with nothing behind it**: no EphemeralRunner of that name and none whose
  status names its id (the objects were deleted behind arcflow's back, or a finalizer was
  removed by hand). It is removed from GitHub; a busy one is refused by GitHub itself
  (``job_still_running``) and stays: its job may still finish somewhere;
* an **EphemeralRunner whose GitHub runner is gone**: registered (``status.runnerId`` set),
  no job, not being deleted, and its id no longer in the list. It can never take a job, so
  it is deleted and its set makes a fresh one.

Either must look so on two scans at least ``grace`` seconds apart before anything is done:
a listing and the cache are never taken at the same instant, and a runner registered between
them looks orphaned once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GitHubRunner:
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class KubeRunner:
    """One EphemeralRunner as the scan needs it."""

    name: str
    runner_id: int
    has_job: bool
    deleting: bool


def orphaned_on_github(
    github: Iterable[GitHubRunner], runners: Iterable[KubeRunner]
) -> list[GitHubRunner]:
    """GitHub runners no EphemeralRunner stands for (by name or by id)."""
    runners = list(runners)
    names = {r.name for r in runners}
    ids = {r.runner_id for r in runners if r.runner_id}
    return [g for g in github if g.name not in names and g.id not in ids]


def gone_from_github(
    github: Iterable[GitHubRunner], runners: Iterable[KubeRunner]
) -> list[KubeRunner]:
    """Registered, idle EphemeralRunners whose GitHub runner is no longer listed."""
    ids = {g.id for g in github}
    return [
        r
        for r in runners
        if r.runner_id and not r.has_job and not r.deleting and r.runner_id not in ids
    ]


@dataclass
class Suspects:
    """Keys that looked orphaned, with when they first did; confirmed after ``grace``."""

    grace: float
    first_seen: dict[str, float]

    @classmethod
    def empty(cls, grace: float) -> Suspects:
        return cls(grace, {})

    def confirm(self, scope: str, keys: Iterable[str], now: float) -> list[str]:
        """Record this scan of ``scope`` (keys of other scopes untouched): returns the keys that
        looked orphaned on an earlier scan at least ``grace`` ago and still do; keys that no
        longer look orphaned are forgotten."""
        prefix = f"{scope}/"
        current = {f"{prefix}{k}" for k in keys}
        for key in [k for k in self.first_seen if k.startswith(prefix) and k not in current]:
            del self.first_seen[key]
        confirmed = []
        for key in sorted(current):
            since = self.first_seen.setdefault(key, now)
            if now - since >= self.grace and since < now:
                confirmed.append(key.removeprefix(prefix))
        return confirmed

    def forget(self, scope: str, key: str) -> None:
        self.first_seen.pop(f"{scope}/{key}", None)


__all__ = ["GitHubRunner", "KubeRunner", "Suspects", "gone_from_github", "orphaned_on_github"]
