"""The orphan scan's rules (orphan_rules.py, ADR 0065)."""

from __future__ import annotations

from arcflow.reconciler.controllers.orphan_rules import (
    GitHubRunner,
    KubeRunner,
    Suspects,
    gone_from_github,
    orphaned_on_github,
)

GITHUB = [GitHubRunner(1, "set-a"), GitHubRunner(2, "set-b"), GitHubRunner(3, "set-c")]


def test_a_github_runner_with_no_ephemeral_runner_by_name_or_id_is_an_orphan() -> None:
    kube = [KubeRunner("set-a", 1, False, False), KubeRunner("renamed", 2, False, False)]
    assert orphaned_on_github(GITHUB, kube) == [GitHubRunner(3, "set-c")]


def test_only_a_registered_idle_live_runner_missing_on_github_is_gone() -> None:
    kube = [
        KubeRunner("set-a", 1, False, False),  # still on GitHub
        KubeRunner("set-d", 4, False, False),  # gone: cleaned up
        KubeRunner("set-e", 5, True, False),  # gone but runs a job: kept
        KubeRunner("set-f", 6, False, True),  # being deleted already
        KubeRunner("set-g", 0, False, False),  # not registered yet
    ]
    assert [r.name for r in gone_from_github(GITHUB, kube)] == ["set-d"]


def test_an_orphan_is_confirmed_on_a_later_scan_after_the_grace() -> None:
    suspects = Suspects.empty(grace=10)
    assert suspects.confirm("s", ["3"], now=100) == []
    assert suspects.confirm("s", ["3"], now=105) == []
    assert suspects.confirm("other", ["9"], now=105) == []
    assert suspects.confirm("s", ["3"], now=111) == ["3"]
    # no longer orphaned: forgotten, the clock starts again
    assert suspects.confirm("s", [], now=112) == []
    assert suspects.confirm("s", ["3"], now=130) == []
    assert suspects.confirm("other", ["9"], now=130) == ["9"]


def test_a_zero_grace_still_needs_two_scans() -> None:
    suspects = Suspects.empty(grace=0)
    assert suspects.confirm("s", ["1"], now=5) == []
    assert suspects.confirm("s", ["1"], now=6) == ["1"]
