"""``arcflow dev``: the whole stack on one machine, with a demo workload and a live view.

Exit codes: 0 every demo job completed (or Ctrl-C after they did), 1 timeout/failure,
3 blocked (a required component is missing or died; the summary names it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from arcflow.common.service.signals import COMMAND_STOP_SIGNALS, stop_on_signals
from arcflow.devstack import connection_file
from arcflow.devstack.nats_server import NatsServerError

if TYPE_CHECKING:
    from arcflow.devstack.live_view import ViewModel


async def _run(
    settings: dict[str, Any], *, headless: bool, summary_json: Path | None
) -> tuple[int, dict[str, Any]]:
    """``settings``: the :class:`StackOptions` fields. The stack's modules load only once the
    screen shows something (their import takes seconds on a busy machine)."""
    console = Console(stderr=headless)
    live: Live | None = None
    last_line = ""
    last_phase = ""

    def on_update(model: ViewModel) -> None:
        nonlocal last_line, last_phase
        if live is not None:
            live.update(render(model, height=console.height, width=console.width))
            return
        if model.phase.text != last_phase:
            last_phase = model.phase.text
            console.print(f"phase: {last_phase}", highlight=False)
        line = " | ".join(
            f"{r.variant}: id={r.scale_set_id} done={r.done}/{r.queued + r.running + r.done}"
            for r in model.rows
        )
        if model.rows and line != last_line:
            last_line = line
            console.print(line, highlight=False)

    with stop_on_signals(COMMAND_STOP_SIGNALS) as stop, contextlib.ExitStack() as screens:
        if not headless:
            live = screens.enter_context(
                Live(
                    _Loading(),
                    console=console,
                    refresh_per_second=4,
                    transient=False,
                )
            )
        else:
            console.print("phase: starting", highlight=False)
        from arcflow.devstack.live_view import render
        from arcflow.devstack.stack import EXIT_FAILED, DevStack, StackOptions

        stack = DevStack(StackOptions(**settings), on_update=on_update)
        try:
            if await stack.start_unless(stop):
                if headless:
                    for name, status in stack.components.items():
                        console.print(f"{name}: {status}", highlight=False)
                code, summary = await stack.run(stop)
            else:  # Ctrl-C while starting: stop now, not after every service came up
                code, summary = EXIT_FAILED, stack.summary()
        finally:
            await stack.stop()
    if summary_json is not None:
        await asyncio.to_thread(_write_summary, summary_json, summary)
    return code, summary


class _Loading:
    """The first frame, while the stack's modules import (seconds on a busy machine): Live
    refreshes it from its own thread, so the counter moves even while the import blocks."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    def __rich__(self) -> Text:
        seconds = int(time.monotonic() - self._since)
        return Text(f"arcflow dev: loading the stack ... {seconds}s", style="yellow")


def _stack_errors() -> tuple[type[Exception], ...]:
    from arcflow.devstack.demo import DemoError
    from arcflow.devstack.stack import StackError

    return (StackError, DemoError)


def demo_outcome(summary: dict[str, Any]) -> str:
    """The last word on the demo: completed, interrupted (Ctrl-C) or why it never ran."""
    jobs = summary["jobs"]
    done = f"{jobs['completed']}/{jobs['total']} completed, {jobs['failed']} failed"
    if jobs["total"] == 0 and jobs["requested"] > 0:
        if summary.get("interrupted"):
            return "demo jobs: interrupted before the demo started (none queued)"
        if summary["blocked_by"]:
            return "demo jobs: none queued (blocked, see below)"
        return "demo jobs: none queued (nothing could run them)"
    if summary.get("interrupted"):
        return f"demo jobs: interrupted: {done}"
    return f"demo jobs: {done}"


def _write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")


@click.command(name="dev")
@click.option(
    "--jobs",
    type=click.IntRange(0),
    default=12,
    show_default=True,
    help="demo jobs, spread round-robin over the variants",
)
@click.option(
    "--job-duration",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="base seconds a demo job runs (jobs take 1x, 1.5x or 2x)",
)
@click.option(
    "--example",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="ARS YAML to apply (default: examples/02-runner-variants.yaml)",
)
@click.option("--headless", is_flag=True, help="no live view; progress lines on stderr")
@click.option(
    "--exit-when-done",
    is_flag=True,
    help="exit once every demo job completed (or the stack is blocked/timed out)",
)
@click.option(
    "--summary-json",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write the run summary (jobs, pods, objects, latencies) here on exit",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1),
    default=600.0,
    show_default=True,
    help="with --exit-when-done: give up after this many seconds (exit 1)",
)
@click.option(
    "--kube",
    "kube_backend",
    type=click.Choice(["emulator", "apiserver", "node"]),
    default="emulator",
    show_default=True,
    help="Kubernetes to run: the in-process API emulator; a real etcd + kube-apiserver + "
    "kube-controller-manager (binaries of scripts/control-plane.sh or KUBEBUILDER_ASSETS); or "
    "a real one-node cluster (kubelet, containerd; scripts/node.sh, root) with arcflow "
    "installed by helm from its images (scripts/build-images.sh) and every pod a container",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="use this cluster instead of the embedded Kubernetes API emulator",
)
@click.option(
    "--github-config-url",
    default=None,
    help="use real GitHub at this config URL instead of the Actions simulator",
)
@click.option(
    "--github-token",
    envvar="ARCFLOW_DEV_GITHUB_TOKEN",
    default=None,
    help="token for --github-config-url (or env ARCFLOW_DEV_GITHUB_TOKEN)",
)
@click.option("--keep-temp", is_flag=True, help="keep the temp dir (logs) after exit")
@click.option(
    "--keep-demo",
    is_flag=True,
    help="with --kubeconfig: leave the example ARS, its objects and the credentials Secret "
    "in the cluster on exit (default: remove them before the services stop)",
)
@click.option(
    "--teardown-timeout",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    help="with --kubeconfig: seconds to wait for the example's objects to be finalized",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write the connection details (NATS URL, kubeconfig, simulator URL and PAT) here "
    "for `source` and `arcflow audit` (default: $ARCFLOW_DEV_ENV, else "
    "$XDG_STATE_HOME/arcflow/dev.env); removed on exit",
)
@click.option("-v", "--verbose", is_flag=True, help="log the stack's own debug lines")
def dev_command(
    jobs: int,
    job_duration: float,
    example: Path | None,
    headless: bool,
    exit_when_done: bool,
    summary_json: Path | None,
    timeout: float,
    kube_backend: str,
    kubeconfig: str | None,
    github_config_url: str | None,
    github_token: str | None,
    keep_temp: bool,
    keep_demo: bool,
    teardown_timeout: float,
    env_file: Path | None,
    verbose: bool,
) -> None:
    """Run nats-server, Kubernetes (the API emulator, or a real API server with --kube
    apiserver), the Actions simulator, a pod runner and all services locally; apply the
    runner-variants example and run a demo workload. With --kube node: a real node, arcflow
    and NATS installed on it with helm, listener and runner pods run from their images."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING)
    if github_config_url and not github_token:
        raise click.UsageError("--github-config-url needs --github-token (or the env var)")
    if kubeconfig and kube_backend != "emulator":
        raise click.UsageError(f"--kube {kube_backend} starts its own cluster: drop --kubeconfig")
    settings: dict[str, Any] = {
        "jobs": jobs,
        "job_duration": job_duration,
        "example": example,
        "kubeconfig": kubeconfig,
        "kube": kube_backend,
        "github_config_url": github_config_url,
        "github_token": github_token,
        "exit_when_done": exit_when_done,
        "timeout": timeout,
        "keep_temp": keep_temp,
        "keep_demo": keep_demo,
        "teardown_timeout": teardown_timeout,
        "env_file": env_file or connection_file.default_path(),
    }
    try:
        code, summary = asyncio.run(_run(settings, headless=headless, summary_json=summary_json))
    except Exception as exc:
        if isinstance(exc, (NatsServerError, *_stack_errors())):
            raise click.ClickException(str(exc)) from None
        raise
    click.echo(demo_outcome(summary), err=True)
    if summary["blocked_by"]:
        click.echo("blocked by: " + ", ".join(summary["blocked_by"]), err=True)
    for leftover in summary["left_behind"]:
        click.echo(f"left behind: {leftover}", err=True)
    raise SystemExit(code)
