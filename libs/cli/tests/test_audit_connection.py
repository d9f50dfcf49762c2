"""``arcflow dev``'s connection file, and ``arcflow audit``'s use of it and of an absent NATS."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from pathlib import Path

import nats
import pytest
from click.testing import CliRunner

from arcflow.cli.main import cli
from arcflow.common.nats import ensure_jetstream
from arcflow.devstack import connection_file
from arcflow.devstack.nats_server import NatsServer

VALUES = {
    connection_file.NATS_URL: "nats://127.0.0.1:4321",
    connection_file.KUBECONFIG: "/tmp/a dir/kubeconfig",
    connection_file.SIM_URL: "http://127.0.0.1:9",
    connection_file.SIM_PAT: "ghp_sim'odd\"value",
}


def test_the_file_is_private_and_a_shell_can_source_it(tmp_path: Path) -> None:
    path = connection_file.write(tmp_path / "state" / "dev.env", VALUES)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    shown = subprocess.run(
        ["bash", "-c", f'source "{path}" && printf "%s\\n" "$ARCFLOW_NATS_URL" "$KUBECONFIG" '
         f'"$ARCFLOW_SIM_PAT"'],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert shown == [VALUES["ARCFLOW_NATS_URL"], VALUES["KUBECONFIG"], VALUES["ARCFLOW_SIM_PAT"]]
    parsed = connection_file.read(path)
    assert parsed is not None
    assert {k: parsed[k] for k in VALUES} == VALUES
    assert not connection_file.stale(parsed)  # this process wrote it


def test_only_its_writer_removes_it(tmp_path: Path) -> None:
    path = connection_file.write(tmp_path / "dev.env", VALUES, pid=os.getpid())
    connection_file.remove(path, pid=os.getpid() + 1)  # another arcflow dev's exit
    assert path.exists()
    connection_file.remove(path)
    assert not path.exists()


def test_default_path_follows_the_environment() -> None:
    assert connection_file.default_path({"ARCFLOW_DEV_ENV": "/x/y.env"}) == Path("/x/y.env")
    assert connection_file.default_path({"XDG_STATE_HOME": "/s", "HOME": "/h"}) == Path(
        "/s/arcflow/dev.env"
    )
    assert connection_file.default_path({"HOME": "/h"}) == Path("/h/.local/state/arcflow/dev.env")


async def _streams(url: str) -> None:
    nc = await nats.connect(url)
    try:
        await ensure_jetstream(nc.jetstream())
    finally:
        await nc.drain()


def _audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.integration
def test_audit_reads_the_running_dev_stack_and_says_0_events(
    private_nats_server: NatsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / "dev.env"
    connection_file.write(env_file, {connection_file.NATS_URL: private_nats_server.url})
    monkeypatch.setenv("ARCFLOW_DEV_ENV", str(env_file))
    monkeypatch.delenv("ARCFLOW_NATS_URL", raising=False)
    code, out, err = _audit("--domain", "errors")
    assert code == 0, err
    assert out == ""
    assert f"NATS {private_nats_server.url} of the running arcflow dev ({env_file})" in err
    assert "0 events: no arcflow stream on NATS at" in err
    asyncio.run(_streams(private_nats_server.url))
    code, out, err = _audit("--domain", "errors")
    assert code == 0, err
    assert out == ""
    assert err.rstrip().endswith("0 events")


@pytest.mark.integration
def test_a_stale_file_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / "dev.env"
    dead = subprocess.Popen(["true"])
    dead.wait()
    connection_file.write(env_file, {connection_file.NATS_URL: "nats://127.0.0.1:2"}, pid=dead.pid)
    monkeypatch.setenv("ARCFLOW_DEV_ENV", str(env_file))
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://127.0.0.1:1")
    code, _, err = _audit("--domain", "jobs")
    assert code == 1
    assert "nats://127.0.0.1:1" in err  # the environment wins; the dead stack's file is not used
    monkeypatch.delenv("ARCFLOW_NATS_URL")
    code, _, err = _audit("--domain", "jobs")
    assert "of the running arcflow dev" not in err


@pytest.mark.integration
def test_no_nats_is_one_line_and_a_hint() -> None:
    code, out, err = _audit("--nats-url", "nats://127.0.0.1:1", "--domain", "jobs")
    assert code == 1
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0] == "Error: cannot reach NATS at nats://127.0.0.1:1 (connection refused)"
    assert lines[1].startswith("hint: start the dev stack (scripts/dev.sh)")
    assert len(lines) == 2
