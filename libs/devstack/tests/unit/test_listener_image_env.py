"""The dev stack runs listener processes with the listener image's environment: the
Dockerfile's ``listener`` stage and :data:`LISTENER_IMAGE_ENV` must say the same, and the image
must compile its bytecode at the optimization level it runs at (or every pod would compile all
its modules at start, on a read-only root filesystem, costing CPU and memory)."""

from __future__ import annotations

import re
from pathlib import Path

from arcflow.devstack.pod_runner import LISTENER_IMAGE_ENV

DOCKERFILE = Path(__file__).resolve().parents[4] / "deploy" / "docker" / "Dockerfile"


def _listener_stage() -> str:
    text = DOCKERFILE.read_text()
    match = re.search(r"^FROM runtime AS listener\n(.*?)(?=^FROM |\Z)", text, re.M | re.S)
    assert match, "the Dockerfile has no listener stage"
    return match.group(1)


def test_listener_image_env_matches_the_dev_stack() -> None:
    stage = _listener_stage()
    env = dict(re.findall(r"^ENV (\w+)=(\S+)$", stage, re.M))
    assert env == dict(LISTENER_IMAGE_ENV)


def test_listener_image_compiles_bytecode_at_its_optimization_level() -> None:
    stage = _listener_stage()
    level = LISTENER_IMAGE_ENV["PYTHONOPTIMIZE"]
    compile_line = re.search(r"^RUN python -m compileall .*-o (\d)\b.*$", stage, re.M)
    assert compile_line, "the listener stage compiles no bytecode"
    assert compile_line.group(1) == level
    # Compiled as root (the virtualenv is root's), then back to the unprivileged user.
    before, after = stage.split(compile_line.group(0), 1)
    assert before.rstrip().endswith("USER 0:0")
    assert after.lstrip().startswith("USER 10001:10001")
