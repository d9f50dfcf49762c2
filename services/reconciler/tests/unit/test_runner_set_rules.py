"""The EphemeralRunnerSet rules: the patch id that decides whether to scale."""

from __future__ import annotations

from arcflow.reconciler.controllers.runner_set_rules import latest_patch_id, should_scale


def test_patch_id_rule() -> None:
    runners = [{"metadata": {"annotations": {"actions.github.com/patch-id": v}}} for v in "372"]
    assert latest_patch_id(runners) == 7
    assert should_scale(0, 7)
    assert should_scale(8, 7)
    assert not should_scale(7, 7)
