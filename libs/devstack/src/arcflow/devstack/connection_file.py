"""``arcflow dev``'s connection details in a file a shell can ``source`` and ``arcflow audit``
reads by default (docs/adrs/0019-dev-connection-file.md).

The file is ``export NAME=value`` lines (values shell-quoted), comments, and one line that
puts the virtualenv's ``bin`` (where ``arcflow`` and ``kubectl`` are installed) first on
``PATH`` unless it is already there, so ``source``-ing it in a second terminal makes the
commands the live view prints work there (the line is not an ``export`` line: :func:`parse`
ignores it). It lives at
``$ARCFLOW_DEV_ENV`` if set, else ``$XDG_STATE_HOME/arcflow/dev.env`` (``~/.local/state/...``).
It is written with mode 0600 (it holds the simulator's PAT, valid for the simulator only) and
removed when the stack stops, unless another ``arcflow dev`` has written it since.

Standard library only: ``arcflow audit`` imports this without the dev stack.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sysconfig
from collections.abc import Mapping
from pathlib import Path

ENV_FILE_VARIABLE = "ARCFLOW_DEV_ENV"
PID_VARIABLE = "ARCFLOW_DEV_PID"
NATS_URL = "ARCFLOW_NATS_URL"
KUBECONFIG = "KUBECONFIG"
SIM_URL = "ARCFLOW_SIM_URL"
SIM_PAT = "ARCFLOW_SIM_PAT"
GITHUB_CONFIG_URL = "ARCFLOW_GITHUB_CONFIG_URL"


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(ENV_FILE_VARIABLE):
        return Path(env[ENV_FILE_VARIABLE]).expanduser()
    state = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or "~") / ".local" / "state")
    return Path(state).expanduser() / "arcflow" / "dev.env"


def scripts_dir() -> str:
    """Where this interpreter's console scripts are (``.venv/bin``: ``arcflow``, ``kubectl``)."""
    return sysconfig.get_path("scripts")


def path_line(bin_dir: str) -> str:
    """Shell text that puts ``bin_dir`` first on ``PATH`` once (sourcing twice adds nothing)."""
    quoted = shlex.quote(bin_dir)
    return f'case ":$PATH:" in *:{quoted}:*) ;; *) PATH={quoted}:"$PATH" ;; esac'


def render(values: Mapping[str, str], *, pid: int, bin_dir: str | None = None) -> str:
    """The file's text: a header, the ``PATH`` line for ``bin_dir`` (default: this
    interpreter's scripts folder), then ``export NAME='value'`` per non-empty value."""
    lines = [
        f"# arcflow dev (pid {pid}): connection details; removed when it stops.",
        "# Use in a shell:  source this file  (then arcflow audit, kubectl, curl $ARCFLOW_SIM_URL)",
        f"# {SIM_PAT} is a token of the local Actions simulator only; nothing else accepts it.",
        "# arcflow and kubectl of this stack's virtualenv, first on PATH:",
        path_line(scripts_dir() if bin_dir is None else bin_dir),
        f"export {PID_VARIABLE}={pid}",
    ]
    lines.extend(f"export {name}={shlex.quote(value)}" for name, value in values.items() if value)
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[str, str]:
    """``NAME=value`` pairs of ``export`` lines (what :func:`render` writes); the rest ignored."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("export "):
            continue
        name, sep, value = line[len("export ") :].partition("=")
        if not sep or not name.isidentifier():
            continue
        try:
            parts = shlex.split(value)
        except ValueError:
            continue
        values[name] = parts[0] if parts else ""
    return values


def write(
    path: Path, values: Mapping[str, str], *, pid: int | None = None, bin_dir: str | None = None
) -> Path:
    """Write atomically with mode 0600 (the directory is created 0700 if missing)."""
    pid = os.getpid() if pid is None else pid
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{pid}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(render(values, pid=pid, bin_dir=bin_dir))
    os.replace(temp, path)
    return path


def read(path: Path) -> dict[str, str] | None:
    """The values in ``path``, or ``None`` when there is no readable file."""
    try:
        return parse(path.read_text())
    except (OSError, UnicodeDecodeError):
        return None


def remove(path: Path, *, pid: int | None = None) -> None:
    """Delete ``path`` if it is still the one written by ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    values = read(path)
    if values is not None and values.get(PID_VARIABLE) == str(pid):
        with contextlib.suppress(OSError):
            path.unlink()


def stale(values: Mapping[str, str]) -> bool:
    """True when the ``arcflow dev`` that wrote ``values`` is no longer running."""
    try:
        pid = int(values.get(PID_VARIABLE, ""))
    except ValueError:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


__all__ = [
    "ENV_FILE_VARIABLE",
    "GITHUB_CONFIG_URL",
    "KUBECONFIG",
    "NATS_URL",
    "SIM_PAT",
    "SIM_URL",
    "default_path",
    "parse",
    "path_line",
    "read",
    "remove",
    "render",
    "scripts_dir",
    "stale",
    "write",
]
