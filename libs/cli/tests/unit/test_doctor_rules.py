"""arcflow doctor's rules (pure): each stuck state gives one finding with since, why and the
thing to do; a healthy set gives none; young states are work in progress, not stuck."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from arcflow.cli.doctor_rules import (
    DeadLetter,
    ScaleSetOnGitHub,
    SetInfo,
    Snapshot,
    diagnose,
    render_human,
    render_json,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD = (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
YOUNG = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
NS, ARS = "team", "build"


def _ars(created: str = OLD, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"namespace": NS, "name": ARS, "creationTimestamp": created},
        "spec": {"githubConfigUrl": "https://github.example/acme", "githubConfigSecret": "gh"},
        "status": {"conditions": conditions or []},
    }


def _set(ids: dict[str, int] | None = None, **kwargs: Any) -> SetInfo:
    return SetInfo(_ars(**kwargs), ("cpu", "gpu"), {} if ids is None else ids)


def _ers(variant: str, scale_set_id: int) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NS,
            "name": f"{ARS}-{variant}",
            "creationTimestamp": OLD,
            "labels": {
                "actions.github.com/scale-set-name": ARS,
                "actions.github.com/runner-variant": variant,
            },
        },
        "spec": {"ephemeralRunnerSpec": {"runnerScaleSetId": scale_set_id}},
    }


def _listener(phase: str = "Running") -> tuple[dict[str, Any], dict[str, Any]]:
    meta = {"namespace": "arc-systems", "name": f"{ARS}-listener", "creationTimestamp": OLD}
    al = {
        "metadata": meta,
        "spec": {"autoscalingRunnerSetNamespace": NS, "autoscalingRunnerSetName": ARS},
    }
    pod = {"metadata": dict(meta), "status": {"phase": phase}}
    return al, pod


def _healthy(**kwargs: Any) -> Snapshot:
    al, pod = _listener()
    return Snapshot(
        now=NOW,
        sets=[_set({"cpu": 1, "gpu": 2})],
        runner_sets=[_ers("cpu", 1), _ers("gpu", 2)],
        listeners=[al],
        listener_pods=[pod],
        records={(NS, ARS, "cpu"): 1, (NS, ARS, "gpu"): 2},
        github={(NS, ARS): [ScaleSetOnGitHub("cpu", 1, True), ScaleSetOnGitHub("gpu", 2, True)]},
        dead_letters=[],
        **kwargs,
    )


def test_a_healthy_set_has_no_finding_and_says_ok() -> None:
    snap = _healthy()
    assert diagnose(snap) == []
    assert "all healthy" in render_human(snap, [])
    assert render_json(snap, [])["healthy"] is True


def test_an_unreachable_url_names_the_condition_the_url_and_the_missing_ids() -> None:
    condition = {
        "type": "ScaleSetsRegistered",
        "status": "False",
        "reason": "GitHubUnreachable",
        "message": "RetriesExhaustedError: connection refused",
        "lastTransitionTime": OLD,
    }
    snap = Snapshot(now=NOW, sets=[_set(conditions=[condition])])
    findings = diagnose(snap)
    checks = [(f.check, f.variant) for f in findings]
    assert checks == [("condition", None), ("scale_set_id", "cpu"), ("scale_set_id", "gpu")]
    first = findings[0]
    assert first.what == "ScaleSetsRegistered=False (GitHubUnreachable)"
    assert first.since == NOW - timedelta(minutes=5)
    assert "https://github.example/acme" in first.fix
    text = render_human(snap, findings)
    assert f"STUCK  {NS}/{ARS}" in text
    assert "(5m00s)" in text


def test_a_young_set_without_ids_is_not_stuck_yet() -> None:
    assert diagnose(Snapshot(now=NOW, sets=[_set(created=YOUNG)])) == []


def test_a_scale_set_gone_on_github_and_an_ers_on_the_old_id() -> None:
    snap = _healthy()
    snap.github = {(NS, ARS): [ScaleSetOnGitHub("cpu", 1, True), ScaleSetOnGitHub("gpu", 2, False)]}
    snap.runner_sets = [_ers("cpu", 1), _ers("gpu", 9)]
    found = {(f.check, f.variant): f for f in diagnose(snap)}
    assert set(found) == {("github", "gpu"), ("drift", "gpu")}
    assert "scale set 2 no longer exists" in found[("github", "gpu")].what


def test_registrar_and_annotation_disagree_is_drift() -> None:
    snap = _healthy()
    snap.records = {(NS, ARS, "cpu"): 1, (NS, ARS, "gpu"): 7}
    found = diagnose(snap)
    assert [(f.check, f.variant) for f in found] == [("drift", "gpu")]


def test_no_listener_and_a_pending_listener_pod() -> None:
    snap = _healthy()
    snap.listeners, snap.listener_pods = [], []
    assert [f.check for f in diagnose(snap)] == ["session"]
    al, pod = _listener("Pending")
    pod["status"]["containerStatuses"] = [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}
    ]
    snap.listeners, snap.listener_pods = [al], [pod]
    (finding,) = diagnose(snap)
    assert finding.what == "listener pod Pending (ImagePullBackOff)"
    assert finding.why == "no such image"


def _runner(name: str, variant: str = "cpu", phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NS,
            "name": name,
            "creationTimestamp": OLD,
            "labels": {
                "actions.github.com/scale-set-name": ARS,
                "actions.github.com/runner-variant": variant,
            },
            "ownerReferences": [{"kind": "EphemeralRunnerSet", "name": f"{ARS}-{variant}"}],
        },
        "status": {"phase": phase},
    }


def _pod(name: str, owner: str, phase: str = "Pending", scheduled: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NS,
            "name": name,
            "creationTimestamp": OLD,
            "labels": {"actions.github.com/scale-set-name": ARS},
            "ownerReferences": [{"kind": "EphemeralRunner", "name": owner}],
        },
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "True" if scheduled else "False",
                 "message": "0/3 nodes are available"}
            ],
        },
    }  # fmt: skip


def test_runners_without_pods_pods_stuck_per_stage_and_pods_without_runners() -> None:
    snap = _healthy()
    snap.runners = [
        _runner("r1"),
        _runner("r2"),
        _runner("r3"),
        _runner("r4", phase="Succeeded"),
        _runner("r5", variant="gpu"),
    ]
    snap.runner_pods = [
        _pod("r3", "r3", scheduled=False),
        _pod("r5", "r5", phase="Running"),
        _pod("orphan", "gone", phase="Running"),
    ]
    found = {f.what: f for f in diagnose(snap)}
    assert set(found) == {
        "2 runner without pod",
        "1 pod stuck: scheduling",
        "1 pod(s) without runner",
    }
    assert found["2 runner without pod"].variant == "cpu"
    assert "r1, r2" in found["2 runner without pod"].why
    assert "orphan" in found["1 pod(s) without runner"].fix


def test_jobs_assigned_with_no_runner_coming() -> None:
    snap = _healthy()
    snap.github = {
        (NS, ARS): [ScaleSetOnGitHub("cpu", 1, True, assigned_jobs=3, running_jobs=1),
                    ScaleSetOnGitHub("gpu", 2, True, assigned_jobs=2, running_jobs=0)]
    }  # fmt: skip
    snap.runners = [_runner("g1", variant="gpu")]
    snap.runner_pods = [_pod("g1", "g1", phase="Running")]
    (finding,) = diagnose(snap)
    assert (finding.check, finding.variant) == ("jobs", "cpu")
    assert finding.what.startswith("2 job(s) assigned but not started")


def test_dead_letters_of_the_last_hour_are_grouped_per_set() -> None:
    snap = _healthy()
    at = NOW - timedelta(minutes=10)
    snap.dead_letters = [
        DeadLetter("arc.k8s.autoscalingrunnersets.team.build", "boom", at, NS, ARS),
        DeadLetter("arc.k8s.autoscalingrunnersets.team.build", "bang", at + timedelta(minutes=1),
                   NS, ARS),
    ]  # fmt: skip
    (finding,) = diagnose(snap)
    assert finding.what == "2 dead letter(s) in the last hour"
    assert finding.since == at
    assert "bang" in finding.why
    data = render_json(snap, [finding])
    assert data["healthy"] is False
    assert data["sets"][0]["healthy"] is False
    assert data["findings"][0]["since"] == at.isoformat()


def test_a_spec_that_does_not_parse() -> None:
    info = SetInfo(_ars(), (), {}, parse_error="spec.maxRunners: not an integer")
    (finding,) = diagnose(Snapshot(now=NOW, sets=[info]))
    assert (finding.check, finding.why) == ("spec", "spec.maxRunners: not an integer")


def _refusal(runner: str, message: str, at: str = OLD) -> dict[str, Any]:
    return {
        "reason": "RunnerPodRefused",
        "lastTimestamp": at,
        "message": message,
        "involvedObject": {"kind": "EphemeralRunner", "namespace": NS, "name": runner},
    }


def test_a_refused_pod_create_is_named_with_the_api_servers_message() -> None:
    """Issue 33: the finding for runners without pods quotes the refusal the reconciler put
    in its ``RunnerPodRefused`` Event, newest first; a runner marked ``InvalidPod`` is a
    finding too, with its status message."""
    snap = _healthy()
    snap.runners = [_runner("r1"), _runner("r2"), _runner("g1", variant="gpu", phase="Failed")]
    snap.runners[2]["status"].update(
        reason="InvalidPod", message='Failed to create the pod: violates PodSecurity "restricted"'
    )
    gone = 'pod r1 refused by the API server: serviceaccount "late" not found'
    older = "pod r1 refused by the API server: something else"
    snap.pod_refusals = [
        _refusal("r1", older, at=(NOW - timedelta(minutes=9)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        _refusal("r1", gone),
    ]
    found = {(f.variant, f.what): f for f in diagnose(snap)}
    without = found[("cpu", "2 runner without pod")]
    assert without.why == f"{gone}: r1, r2"
    assert "kubectl describe er -n team r1" in without.fix
    failed = found[("gpu", "1 runner failed: pod refused")]
    assert "PodSecurity" in failed.why
