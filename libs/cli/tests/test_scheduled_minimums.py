"""``arcflow validate`` and ``arcflow plan`` on scheduledOverrides and on the inheritance trap
of ADR 0063 (a variant with its own template inheriting minRunners above 0)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from arcflow.cli.main import cli

FLEET = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata: {name: fleet, namespace: ci}
spec:
  githubConfigUrl: https://github.com/acme
  githubConfigSecret: github-auth
  minRunners: 1
  template: {spec: {containers: [{name: runner, image: cpu}]}}
  scheduledOverrides:
    - startTime: "2026-01-05T09:00:00+02:00"
      endTime: "2026-01-05T17:00:00+02:00"
      minRunners: 4
      recurrenceRule: {frequency: Weekly, untilTime: "2026-12-31T00:00:00Z"}
      variants: [cpu]
  runnerVariants:
    - name: cpu
      maxRunners: 3
    - name: gpu
      template: {spec: {containers: [{name: runner, image: gpu}]}}
"""


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ars.yaml"
    path.write_text(text)
    return str(path)


def test_validate_warns_about_an_inherited_minimum_but_passes(tmp_path: Path) -> None:
    code, out, err = _run("validate", _write(tmp_path, FLEET))
    assert code == 0
    assert out.strip() == "valid"
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert "spec.runnerVariants[1].minRunners" in warning
    assert "'gpu' inherits spec.minRunners (1)" in warning
    assert "set minRunners: 0 on the variant" in warning


def test_an_explicit_zero_silences_the_warning(tmp_path: Path) -> None:
    text = FLEET.replace("    - name: gpu\n", "    - name: gpu\n      minRunners: 0\n")
    code, _out, err = _run("validate", _write(tmp_path, text))
    assert code == 0
    assert "warning:" not in err


def test_validate_refuses_bad_overrides_with_clear_messages(tmp_path: Path) -> None:
    text = (
        FLEET.replace(
            'endTime: "2026-01-05T17:00:00+02:00"', 'endTime: "2026-01-05T08:00:00+02:00"'
        )
        .replace("frequency: Weekly", "frequency: Fortnightly")
        .replace("variants: [cpu]", "variants: [cpu, arm]")
    )
    code, out, _err = _run("validate", _write(tmp_path, text))
    assert code == 1
    lines = out.splitlines()
    assert (
        "spec.scheduledOverrides[0].endTime: is not after startTime; endTime must be after "
        "startTime"
    ) in lines
    assert (
        "spec.scheduledOverrides[0].recurrenceRule.frequency: 'Fortnightly' is not a frequency; "
        'supported values: "Daily", "Weekly", "Monthly", "Yearly"'
    ) in lines
    assert any(
        line.startswith("spec.scheduledOverrides[0].variants[1]: 'arm' is not a runner variant")
        and "(variants: cpu, gpu)" in line
        for line in lines
    ), lines


def test_plan_shows_the_minimum_now_and_the_next_windows(tmp_path: Path) -> None:
    # Monday 7 December 2026, 08:00 UTC = 10:00+02:00: inside the Monday window.
    code, _out, err = _run("plan", _write(tmp_path, FLEET), "--at", "2026-12-07T08:00:00Z")
    assert code == 0, err
    lines = err.splitlines()
    start = lines.index("note: fleet: scheduled minimums (scheduledOverrides):")
    assert lines[start + 1] == (
        "  cpu: minRunners 3 at 2026-12-07T08:00:00Z (from spec.scheduledOverrides[0]; "
        "configured 1, maxRunners 3)"
    )
    assert lines[start + 2] == (
        "    spec.scheduledOverrides[0]: minRunners 4 (capped to 3), Weekly until "
        "2026-12-31T00:00:00Z; next: [2026-12-07T09:00:00+02:00, 2026-12-07T17:00:00+02:00), "
        "[2026-12-14T09:00:00+02:00, 2026-12-14T17:00:00+02:00), "
        "[2026-12-21T09:00:00+02:00, 2026-12-21T17:00:00+02:00)"
    )
    assert any(
        line.startswith("warning: fleet: spec.runnerVariants[1].minRunners") for line in lines
    )


def test_plan_after_until_has_no_window_left(tmp_path: Path) -> None:
    code, _out, err = _run("plan", _write(tmp_path, FLEET), "--at", "2027-01-04T08:00:00Z")
    assert code == 0, err
    assert "cpu: minRunners 1 at 2027-01-04T08:00:00Z (no window open;" in err
    assert "next: none (every window has ended)" in err


def test_plan_refuses_a_bad_at(tmp_path: Path) -> None:
    code, _out, err = _run("plan", _write(tmp_path, FLEET), "--at", "tomorrow")
    assert code == 2
    assert "--at must be an RFC 3339 date-time with an offset" in err
