"""Pure tests of the live view's data model and event lines."""

from __future__ import annotations

from rich.console import Console

from arcflow.common import constants
from arcflow.common.events import ScaleSetAssigned, ScaleSetDeleted, encode_event
from arcflow.common.events.envelope import EventKeys
from arcflow.devstack.demo import ViewCounts
from arcflow.devstack.live_view import (
    FEED_SUBJECTS,
    EventTail,
    build_view_model,
    busy_by_scale_set,
    describe_event,
    desired_by_variant,
    render,
    scale_set_ids_from_events,
    variant_of,
)

VARIANTS = ["cpu-small", "cpu-large", "gpu"]


def _assigned(variant: str, scale_set_id: int, ars: str = "arc-runners") -> ScaleSetAssigned:
    return ScaleSetAssigned(
        source="registrar",
        keys=EventKeys(namespace="arc", ars=ars, variant=variant),
        variant=variant,
        scale_set_id=scale_set_id,
        scale_set_name=f"{ars}-{variant}",
        runner_group_id=1,
        runner_group_name="Default",
    )


def test_feed_never_listens_to_rpc_subjects() -> None:
    assert all(not s.startswith("arc.rpc") for s in FEED_SUBJECTS)
    assert "arc.>" not in FEED_SUBJECTS


def test_scale_set_ids_follow_assignments_and_deletions() -> None:
    events = [
        _assigned("gpu", 3),
        _assigned("cpu-small", 1),
        _assigned("gpu", 7, ars="other"),
        ScaleSetDeleted(
            source="registrar",
            keys=EventKeys(namespace="arc", ars="arc-runners", variant="cpu-small"),
            variant="cpu-small",
            scale_set_id=1,
            scale_set_name="arc-runners-cpu-small",
            reason="variant removed",
        ),
    ]
    assert scale_set_ids_from_events(events, "arc-runners") == {"gpu": 3}


def test_event_tail_keeps_the_last_lines_and_assignments() -> None:
    tail = EventTail(length=2)
    tail.add("arc.scalesets.arc.arc-runners.gpu", encode_event(_assigned("gpu", 3)))
    tail.add("arc.jobs.x", b"not json")
    tail.add("arc.scalesets.arc.arc-runners.cpu-small", encode_event(_assigned("cpu-small", 1)))
    assert tail.count == 3
    assert len(tail.lines) == 2
    assert tail.lines[0] == "arc.jobs.x (unparsed)"
    assert "arc-runners-cpu-small -> id 1" in tail.lines[1]
    assert len(tail.assignments) == 2


def test_describe_event_names_source_and_change() -> None:
    line = describe_event("s", encode_event(_assigned("gpu", 3)))
    assert "registrar" in line
    assert "scale set arc-runners-gpu -> id 3" in line


def test_variant_of_prefers_label_then_name() -> None:
    label = {constants.LABEL_RUNNER_VARIANT: "gpu"}
    assert variant_of("whatever", label, "arc-runners", VARIANTS) == "gpu"
    assert variant_of("arc-runners-cpu-large", None, "arc-runners", VARIANTS) == "cpu-large"
    assert variant_of("arc-runners-cpu-small-runner-ab12c", {}, "arc-runners", VARIANTS) == (
        "cpu-small"
    )
    assert variant_of("arc-runners-cpu", {}, "arc-runners", VARIANTS) is None


def test_desired_and_busy() -> None:
    ers = [
        {"metadata": {"name": "arc-runners-gpu"}, "spec": {"replicas": 2}},
        {"metadata": {"name": "arc-runners-cpu-small"}, "spec": {}},
        {"metadata": {"name": "unrelated"}, "spec": {"replicas": 9}},
    ]
    assert desired_by_variant(ers, "arc-runners", VARIANTS) == {"gpu": 2, "cpu-small": 0}
    snapshot = {
        "runners": [
            {"runnerScaleSetId": 3, "status": "busy"},
            {"runnerScaleSetId": 3, "status": "busy"},
            {"runnerScaleSetId": 1, "status": "online-idle"},
        ]
    }
    assert busy_by_scale_set(snapshot) == {3: 2}
    assert busy_by_scale_set(None) == {}


def test_view_model_rows_and_render() -> None:
    model = build_view_model(
        title="t",
        variants=VARIANTS,
        scale_set_ids={"gpu": 3},
        desired={"gpu": 2},
        current={"gpu": 1},
        busy={3: 1},
        jobs={"gpu": ViewCounts(queued=1, running=1, done=2)},
        components={"reconciler": "missing: not built", "watcher": "running"},
        events=["e1"],
        notes=["demo cannot complete without: reconciler"],
    )
    gpu = model.rows[2]
    assert (gpu.scale_set_id, gpu.desired, gpu.current, gpu.busy) == (3, 2, 1, 1)
    assert (gpu.queued, gpu.running, gpu.done, gpu.failed) == (1, 1, 2, 0)
    assert model.rows[0].scale_set_id is None
    assert model.rows[0].busy == 0
    console = Console(width=140, record=True)
    console.print(render(model))
    text = console.export_text()
    assert "cpu-large" in text
    assert "missing: not built" in text
    assert "demo cannot complete without: reconciler" in text
