"""The live view lists every AutoscalingRunnerSet of the cluster, not only the demo's, with
its phase, how many variants are registered and each False condition (issue #23: a user's
own ARS stuck Pending was invisible there)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from arcflow.devstack.live_view import build_view_model, render, set_rows


def _ars(ns: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": ns,
            "name": name,
            "annotations": {"actions.github.com/runner-scale-set-ids": '{"cpu":1,"gpu":2}'},
        },
        "spec": {"runnerVariants": [{"name": "cpu"}, {"name": "gpu"}]},
        "status": status,
    }


def test_rows_for_every_set_with_its_false_conditions() -> None:
    mine = {
        "metadata": {"namespace": "team", "name": "mine"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "SpecValid", "status": "True", "reason": "Valid"},
                {
                    "type": "ScaleSetsRegistered",
                    "status": "False",
                    "reason": "GitHubUnreachable",
                    "message": "ConnectError: Name or service not known",
                },
            ],
        },
    }
    rows = set_rows([_ars("arc-runners", "arc-runners", phase="Running"), mine])
    assert [(r.name, r.phase, r.registered, r.variants) for r in rows] == [
        ("arc-runners/arc-runners", "Running", 2, 2),
        ("team/mine", "Pending", 0, 1),
    ]
    assert rows[1].problems == (
        "ScaleSetsRegistered: GitHubUnreachable: ConnectError: Name or service not known",
    )
    assert rows[0].problems == ()


def test_the_screen_shows_the_sets_and_why_one_is_stuck() -> None:
    stuck = _ars("team", "mine", phase="Pending")
    stuck["metadata"]["annotations"] = {}
    stuck["status"]["conditions"] = [
        {
            "type": "ScaleSetsRegistered",
            "status": "False",
            "reason": "GitHubUnreachable",
            "message": "no answer",
        }
    ]
    model = build_view_model(
        title="arcflow dev arc-runners/arc-runners",
        variants=["cpu"],
        scale_set_ids={"cpu": 1},
        desired={},
        current={},
        busy={},
        jobs={},
        components={},
        events=[],
        sets=[_ars("arc-runners", "arc-runners", phase="Running"), stuck],
    )
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render(model))
    text = console.export_text()
    assert "AutoscalingRunnerSets:" in text
    assert "arc-runners/arc-runners  Running  2/2 scale sets" in text
    assert "team/mine  Pending  0/2 scale sets" in text
    assert "ScaleSetsRegistered: GitHubUnreachable: no answer" in text
