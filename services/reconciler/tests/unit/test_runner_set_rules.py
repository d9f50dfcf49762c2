"""The EphemeralRunnerSet rules: the patch id that decides whether to scale, upstream's
buckets, the idle runners a forced scale-down may remove, read through SetRunner."""

from __future__ import annotations

from typing import Any

from arcflow.reconciler.controllers.runner_set_rules import (
    SetRunner,
    bucket_runners,
    idle_removal_candidates,
    latest_patch_id,
    should_scale,
)


def _runner(name: str, created: str = "", deleting: bool = False, **status: Any) -> SetRunner:
    metadata: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return SetRunner({"metadata": metadata, "status": status})


def test_patch_id_rule() -> None:
    runners = [
        SetRunner({"metadata": {"annotations": {"actions.github.com/patch-id": v}}})
        for v in ["3", "7", "2", "x", "-9"]
    ]
    assert latest_patch_id(runners) == 7  # an unusable value counts as none
    assert latest_patch_id([SetRunner({"metadata": {}})]) == 0
    assert latest_patch_id([]) == 0
    assert should_scale(0, 7)
    assert should_scale(8, 7)
    assert not should_scale(7, 7)


def test_buckets_and_idle_candidates() -> None:
    runners = [
        _runner("gone", deleting=True, phase="Running"),
        _runner("busy", "2026-01-01T00:00:01Z", phase="Running", runnerId=1, jobId="j1"),
        _runner("idle-new", "2026-01-01T00:00:05Z", phase="Running", runnerId=2),
        _runner("done", phase="Succeeded", runnerId=3),
        _runner("failed", phase="Failed", runnerId=4),
        _runner("old", phase="Outdated", runnerId=5),
        _runner("unregistered", "2026-01-01T00:00:00Z"),
        _runner("pending", "2026-01-01T00:00:03Z", phase="Pending", runnerId=6),
    ]
    buckets = bucket_runners(runners)
    assert {k: [r.name for r in v] for k, v in buckets.items()} == {
        "deleting": ["gone"],
        "running": ["busy", "idle-new"],
        "finished": ["done"],
        "failed": ["failed"],
        "outdated": ["old"],
        "pending": ["unregistered", "pending"],
    }
    # Pending before running, oldest first; never an unregistered or a busy runner.
    assert [r.name for r in idle_removal_candidates(buckets)] == ["pending", "idle-new"]
    assert (runners[1].has_job, runners[1].runner_id) == (True, 1)
    assert (runners[6].runner_id, runners[6].phase) == (0, "")
