"""What the live view's footer tells a user to type in a second terminal works there: the
connection file is sourced in a fresh bash whose PATH has no virtualenv, then each command
after ``then:`` runs as printed, against a real nats-server and the Kubernetes API emulator."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import nats
import pytest

from arcflow.common.nats.jetstream import ensure_jetstream
from arcflow.devstack import connection_file
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.live_view import footer_lines
from arcflow.devstack.nats_server import NatsServer

BARE_PATH = "/usr/bin:/bin"  # a new terminal's PATH, without .venv/bin


def _second_terminal(env_file: Path, command: str, home: Path) -> list[str]:
    env = {"PATH": BARE_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
    return ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "--noprofile",
            "--norc", "-c", f"source {env_file} && {command}"]  # fmt: skip


async def _run(argv: list[str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _then(lines: list[str]) -> list[str]:
    found = [line for line in lines if line.strip().startswith("then: ")]
    assert len(found) == 1, lines
    return [part.strip() for part in found[0].split("then: ", 1)[1].split(";")]


@pytest.mark.integration
async def test_the_printed_commands_work_after_sourcing_the_file(
    private_nats_server: NatsServer, kube_emulator: KubeEmulator, tmp_path: Path
) -> None:
    nc = await nats.connect(private_nats_server.url)
    try:
        await ensure_jetstream(nc.jetstream())
    finally:
        await nc.drain()
    kubeconfig = str(kube_emulator.write_kubeconfig(tmp_path / "kubeconfig"))
    env_file = connection_file.write(
        tmp_path / "state" / "dev.env",
        {connection_file.NATS_URL: private_nats_server.url, connection_file.KUBECONFIG: kubeconfig},
    )
    lines = footer_lines(
        env_file=str(env_file),
        nats_url=private_nats_server.url,
        kubeconfig=kubeconfig,
        sim_url=None,
        job_label=None,
    )
    assert f"other terminals: source {env_file}" in lines
    commands = _then(lines)
    assert [c.split()[0] for c in commands] == ["arcflow", "kubectl"]

    # Without the file, the bare shell has neither command: the file is what makes them work.
    code, _, err = await _run(_second_terminal(Path("/dev/null"), "arcflow --help", tmp_path))
    if code == 0:
        pytest.fail("an arcflow is on /usr/bin:/bin: this test proves nothing here")
    assert "command not found" in err

    for command in commands:
        code, out, err = await _run(_second_terminal(env_file, command, tmp_path))
        assert code == 0, f"{command}: {out}{err}"
        if command.startswith("arcflow audit"):
            # it reached this NATS (the exported URL): the streams are there and empty
            assert (out, err.strip()) == ("", "0 events")
        else:
            assert "No resources found" in out + err or "NAME" in out, out + err

    # Sourcing twice (a second `source` in the same terminal) puts the folder on PATH once.
    twice = f"source {env_file} && echo $PATH"
    code, out, _ = await _run(_second_terminal(env_file, twice, tmp_path))
    assert code == 0
    entries = out.strip().split(":")
    assert entries.count(connection_file.scripts_dir()) == 1
    assert entries[0] == connection_file.scripts_dir()


def test_the_file_keeps_parsing_to_its_exports_only(tmp_path: Path) -> None:
    path = connection_file.write(
        tmp_path / "dev.env", {connection_file.NATS_URL: "nats://127.0.0.1:1"}, bin_dir="/a b/bin"
    )
    text = path.read_text()
    assert "PATH='/a b/bin':\"$PATH\"" in text
    assert connection_file.read(path) == {
        connection_file.PID_VARIABLE: str(os.getpid()),
        connection_file.NATS_URL: "nats://127.0.0.1:1",
    }


def test_without_a_file_each_line_carries_its_setting_and_the_full_path() -> None:
    lines = footer_lines(
        env_file=None, nats_url="nats://127.0.0.1:9", kubeconfig="/k/cfg", sim_url=None,
        job_label=None,
    )  # fmt: skip
    arcflow = f"{connection_file.scripts_dir()}/arcflow"
    assert f"audit: ARCFLOW_NATS_URL=nats://127.0.0.1:9 {arcflow} audit --follow" in lines
    assert "kubectl: export KUBECONFIG=/k/cfg" in lines
    assert not any("then:" in line for line in lines)
    assert Path(arcflow).is_file()
