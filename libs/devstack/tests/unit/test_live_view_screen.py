"""The live view as a person sees it: phases, folded repeats, and the whole screen at 80x24."""

from __future__ import annotations

import re

from rich.console import Console

from arcflow.common.events import ScaleDecision, ScaleSetAssigned, encode_event
from arcflow.common.events.envelope import EventKeys
from arcflow.devstack.demo import ViewCounts
from arcflow.devstack.live_view import (
    EventTail,
    Progress,
    build_view_model,
    footer_lines,
    phase_of,
    render,
)

VARIANTS = ["cpu-small", "cpu-large", "gpu"]
NAMES = {v: f"arc-runners-{v}" for v in VARIANTS}
KUBECONFIG = "/tmp/arcflow-dev-k2j4x9qa/kubeconfig"


def _decision(variant: str, desired: int, assigned: int) -> bytes:
    return encode_event(
        ScaleDecision(
            source="listener",
            keys=EventKeys(namespace="arc-runners", ars="arc-runners", variant=variant),
            scale_set_id=VARIANTS.index(variant) + 1,
            ephemeral_runner_set=NAMES[variant],
            desired_replicas=desired,
            patch_id=1,
            assigned_jobs=assigned,
            min_runners=0,
            max_runners=10,
        )
    )


def _assigned(variant: str) -> bytes:
    return encode_event(
        ScaleSetAssigned(
            source="registrar",
            keys=EventKeys(namespace="arc-runners", ars="arc-runners", variant=variant),
            variant=variant,
            scale_set_id=VARIANTS.index(variant) + 1,
            scale_set_name=NAMES[variant],
            runner_group_id=1,
            runner_group_name="Default",
        )
    )


def test_phases_from_start_to_done_and_interrupted() -> None:
    assert phase_of(Progress(components_up=3, components=8)).text == "starting (3/8 parts up)"
    base = Progress(started=True, variants=3, registered=1, requested=12)
    assert phase_of(base).text == "registering scale sets 1/3"
    running = Progress(started=True, variants=3, registered=3, requested=12, queued=12, done=7)
    assert phase_of(running).text == "demo 7/12 done"
    done = Progress(started=True, variants=3, registered=3, requested=12, queued=12, done=12)
    assert phase_of(done).text == "demo complete: 12/12 (still running)"
    assert phase_of(Progress(stopping=True, interrupted=True)).text == (
        "stopping: interrupted before the demo started"
    )
    cut = Progress(started=True, stopping=True, interrupted=True, queued=12, done=5)
    assert phase_of(cut).text == "stopping: interrupted at demo 5/12"
    blocked_exit = Progress(started=True, stopping=True, blocked=("pod runner",))
    assert phase_of(blocked_exit).text == "stopping: blocked (the demo needs pod runner)"
    timed_out = Progress(started=True, stopping=True, queued=12, done=5)
    assert phase_of(timed_out).text == "stopping at demo 5/12"
    blocked = Progress(started=True, variants=3, requested=12, blocked=("reconciler",))
    assert phase_of(blocked).text == "blocked: the demo needs reconciler"


def test_repeated_decisions_fold_and_the_history_stays() -> None:
    tail = EventTail(length=6)
    for variant in VARIANTS:
        tail.add("arc.scalesets.x", _assigned(variant))
    tail.add("arc.scale.x", _decision("gpu", 2, 2))
    for _ in range(20):  # the idle "scale to 0" every few seconds, three variants interleaved
        for variant in VARIANTS:
            tail.add("arc.scale.x", _decision(variant, 0, 0))
    lines = tail.lines
    assert len(lines) == 6
    # The history (three assignments and the scale-up) is still there, above the folded lines.
    assert "arc-runners-gpu -> id 3" in lines[1]
    assert lines[2].endswith("scale arc-runners-gpu to 2 (2 assigned jobs)")
    assert [line.split("listener   ")[1] for line in lines[3:]] == [
        f"scale arc-runners-{v} to 0 (0 assigned jobs) (x20)" for v in VARIANTS
    ]
    assert tail.count == 3 + 1 + 60


def _screen(events: list[str], notes: list[str] | None = None) -> list[str]:
    model = build_view_model(
        title="arcflow dev arc-runners/arc-runners",
        variants=VARIANTS,
        scale_set_ids={"cpu-small": 1, "cpu-large": 2, "gpu": 3},
        desired={"cpu-small": 1, "gpu": 2},
        current={"cpu-small": 1, "gpu": 2},
        busy={3: 2},
        jobs={v: ViewCounts(queued=1, running=1, done=2) for v in VARIANTS},
        components={
            "nats": "running nats://127.0.0.1:41234",
            "kubernetes": "running emulator http://127.0.0.1:41235",
            "github": "running simulator http://127.0.0.1:41236",
            "pod runner": "running",
            "listener": "ready (runs in listener pods)",
            "watcher": "running (pid 7, healthy, 1 restart)",
            "registrar": "restarting in 2s (killed by SIGKILL, 1 restart)",
            "reconciler": "running (pid 9, healthy)",
            "example": "applied ARS arc-runners/arc-runners",
        },
        events=events,
        notes=notes or [],
        scale_set_names=NAMES,
        progress=Progress(started=True, variants=3, registered=3, requested=12, queued=12, done=6),
        elapsed=83,
        footer=footer_lines(
            env_file="/home/dev/.local/state/arcflow/dev.env",
            nats_url="nats://127.0.0.1:41234",
            kubeconfig=KUBECONFIG,
            sim_url="http://127.0.0.1:41236",
            job_label="arc-runners-gpu",
        ),
    )
    console = Console(width=80, height=24, record=True, color_system=None, file=_Sink())
    console.print(render(model, height=console.height, width=console.width))
    return console.export_text().rstrip("\n").split("\n")


class _Sink:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def test_the_screen_fits_80x24_with_names_footer_and_newest_events() -> None:
    events = [
        f"12:00:{i:02d} reconciler created er arc-runners-gpu-runner-{i:05d}: new runner "
        f"for the gpu variant (pod template hash unchanged)"
        for i in range(40)
    ]
    lines = _screen(events)
    text = "\n".join(lines)
    assert len(lines) <= 23, text  # one line stays for the cursor
    assert all(len(line) <= 80 for line in lines)
    assert "demo 6/12 done" in lines[0]
    assert "1:23" in lines[0]
    for variant in VARIANTS:  # whole variant and scale set names, with the ids
        assert re.search(rf"^{variant}\s+arc-runners-{variant} \(\d\)", text, re.M), text
    assert "watcher ok (1 restart)" in text
    assert "registrar: restarting in 2s (killed by SIGKILL, 1 restart)" in text
    # The newest event shows; the oldest gave way.
    assert "arc-runners-gpu-runner-00039" in text
    assert "arc-runners-gpu-runner-00000" not in text
    # The footer is whole: Ctrl-C, the file to source, audit, kubectl, more jobs.
    assert "Ctrl-C stops everything." in text
    assert "source /home/dev/.local/state/arcflow/dev.env" in text
    assert "  then: arcflow audit; kubectl get ars,ers,pods -A" in text  # the file sets the rest
    assert "/_sim/jobs" in text
    # No word is broken across lines: every token of the screen is a token of the input.
    words = set(" ".join([*events, *footer_lines(
        env_file="/home/dev/.local/state/arcflow/dev.env", nats_url="nats://127.0.0.1:41234",
        kubeconfig=KUBECONFIG, sim_url="http://127.0.0.1:41236", job_label="arc-runners-gpu",
    )]).split())  # fmt: skip
    for line in lines[-8:]:
        for word in line.split():
            assert word in words or not word.startswith(("arc-", "/", "http", "nats")), word


def test_a_note_still_leaves_the_footer_on_screen() -> None:
    lines = _screen(["12:00:00 watcher    added ars arc-runners"], notes=["a note"])
    assert len(lines) <= 23
    assert lines[-1].startswith(("more jobs", "http", "'"))
    assert "a note" in "\n".join(lines)
