"""The images, built from this checkout and started (docs/images.md, ADR 0058).

``scripts/build-images.sh`` builds ``deploy/docker/Dockerfile`` with buildah on a debootstrap
base (cached after the first build). Each image is then started two ways, as the charts run it
(uid 10001, read-only root filesystem, a writable ``/tmp`` only, no capabilities):

- ``podman``: rootful podman with runc and the host's network. Skipped, with podman's reason,
  only where the sandbox refuses to run containers (``SANDBOX_REFUSAL``: the OCI runtime cannot
  set a container up); any other podman failure, a broken image included, fails;
- ``chroot``: the image's filesystem (a buildah working container, mounted) bind-mounted
  read-only in a private mount namespace, the image's entrypoint and environment run in it with
  ``chroot --userspec=10001:10001``: no OCI runtime, no cgroups.

The watcher, registrar and reconciler answer ``/healthz`` and ``/readyz`` against a real
nats-server and the real kube-apiserver; the listener image starts from a ``config.json``, opens
its message session on the Actions simulator and serves ``/metrics``. Each stops with exit code
0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import yaml
from packaging.markers import Marker

from arcflow.common.actions import ActionsClient, Label, PatCredentials, RetryPolicy, RunnerScaleSet
from arcflow.common.kube import KubeClient
from arcflow.common.listener_config import ListenerConfig, ScaleSetConfig
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer, free_port
from tests import polling

pytestmark = [
    pytest.mark.integration,
    pytest.mark.scenario,  # a cold build is ~8 min (debootstrap, four images); cached ~1 min
    pytest.mark.timeout(1800),
]

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build-images.sh"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
UID = 10001
SERVICES = ["watcher", "registrar", "reconciler"]
#: Where the test's files (kubeconfig, listener config) appear inside a container.
CONF_DIR = "/etc/arcflow"
START_WITHIN = 60.0  # a cold Python start on a loaded 2-core machine


async def _run(*argv: str, limit: float = 120.0, check: bool = True) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(limit):
        out, err = await proc.communicate()
    code = proc.returncode if proc.returncode is not None else -1
    if check and code != 0:
        raise AssertionError(f"{shlex.join(argv)} exited {code}: {err.decode()[-2000:]}")
    return code, out.decode(), err.decode()


# --- the build ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Image name -> reference, as the charts reference them (built or reused from the cache)."""
    if os.geteuid() != 0:
        pytest.skip("building the images needs root (debootstrap, buildah's storage)")
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1500, check=False
    )
    assert proc.returncode == 0, f"build-images.sh failed:\n{proc.stderr[-4000:]}"
    refs = proc.stdout.split()
    built = {ref.rsplit("/", 1)[-1].split(":")[0]: ref for ref in refs}
    assert sorted(built) == sorted([*SERVICES, "listener"]), proc.stdout
    return built


@dataclass(frozen=True)
class ImageConfig:
    env: dict[str, str]
    entrypoint: list[str]
    user: str
    workdir: str


async def image_config(ref: str) -> ImageConfig:
    _, out, _ = await _run("buildah", "inspect", "--type", "image", ref)
    config = json.loads(out)["OCIv1"]["config"]
    env = dict(item.split("=", 1) for item in config.get("Env") or [])
    return ImageConfig(
        env=env,
        entrypoint=[*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])],
        user=config.get("User", ""),
        workdir=config.get("WorkingDir", "/"),
    )


def dockerfile_entrypoint(target: str) -> list[str]:
    """The ENTRYPOINT of ``target`` in the Dockerfile (the file docker users build)."""
    stage = re.search(
        rf"^FROM \S+ AS {target}\n(.*?)(?=^FROM |\Z)", DOCKERFILE.read_text(), re.M | re.S
    )
    assert stage, f"no stage {target} in {DOCKERFILE}"
    found = re.search(r"^ENTRYPOINT (\[.*\])$", stage.group(1), re.M)
    assert found, f"no ENTRYPOINT in stage {target}"
    entrypoint: list[str] = json.loads(found.group(1))
    return entrypoint


@pytest.mark.parametrize("name", [*SERVICES, "listener"])
async def test_image_is_the_dockerfiles_target_and_holds_the_locked_packages(
    images: dict[str, str], name: str
) -> None:
    """The image is the Dockerfile's target as docker builds it (entrypoint, uid, workdir), and
    its app layer holds exactly the distributions uv.lock resolves for the package."""
    ref = images[name]
    config = await image_config(ref)
    assert config.entrypoint == dockerfile_entrypoint(name)
    assert config.user == f"{UID}:{UID}"
    assert config.workdir == "/tmp"
    # uv as scripts/ensure-uv.sh provides it: on PATH, else the module pip put beside python3.
    uv = [shutil.which("uv")] if shutil.which("uv") else ["python3", "-m", "uv"]
    _, export, _ = await _run(
        *uv, "export", "--frozen", "--no-dev", "--package", f"arcflow-{name}",
        "--no-hashes", "--no-header", "--no-annotate", "--directory", str(ROOT),
    )  # fmt: skip
    expected = set()
    for line in export.splitlines():
        if line.startswith("-e "):  # a workspace member: installed, not editable
            pyproject = ROOT / line[3:].strip() / "pyproject.toml"
            project = _toml(pyproject)["project"]
            expected.add((_norm(project["name"]), project["version"]))
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate():
            continue
        pkg, _, version = requirement.strip().partition("==")
        expected.add((_norm(pkg), version))
    async with mounted_image(ref) as rootfs:
        site = rootfs / "app/.venv/lib/python3.11/site-packages"
        installed = {
            (_norm(m.group(1)), m.group(2))
            for m in (re.match(r"(.+)-([^-]+)\.dist-info$", p.name) for p in site.iterdir())
            if m
        }
    assert installed == expected


def _toml(path: Path) -> dict[str, Any]:
    import tomllib

    with path.open("rb") as fh:
        return tomllib.load(fh)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@asynccontextmanager
async def mounted_image(ref: str) -> AsyncIterator[Path]:
    """A buildah working container of ``ref``, mounted: the image's filesystem (writes go to
    the container's own layer, never to the image); removed after."""
    name = f"arcflow-test-{secrets.token_hex(4)}"
    await _run("buildah", "from", "--pull-never", "--quiet", "--name", name, ref)
    try:
        _, out, _ = await _run("buildah", "mount", name)
        yield Path(out.strip())
    finally:
        await _run("buildah", "rm", name, check=False)


# --- running an image ----------------------------------------------------------------------------


class Started(Protocol):
    """A started image: ``pid`` is its entrypoint's process on this machine."""

    pid: int

    async def logs(self) -> str: ...
    async def stop(self) -> int: ...


class Runner(Protocol):
    name: str

    async def refused(self, ref: str) -> str | None: ...
    def start(
        self, ref: str, env: dict[str, str], conf: Path
    ) -> AbstractAsyncContextManager[Started]: ...


#: What every run gets, as the charts' securityContext sets it.
PODMAN_FLAGS = [
    "--runtime", "runc", "--network", "host",
    "--read-only", "--tmpfs", "/tmp:rw,size=64m,mode=1777",
    "--user", f"{UID}:{UID}", "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges",
    "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
]  # fmt: skip


@dataclass
class PodmanStarted:
    name: str
    pid: int

    async def logs(self) -> str:
        _, out, err = await _run("podman", "logs", self.name, check=False)
        return out + err

    async def stop(self) -> int:
        await _run("podman", "stop", "--time", "20", self.name, limit=60)
        _, out, _ = await _run("podman", "inspect", "--format", "{{.State.ExitCode}}", self.name)
        return int(out.strip())


#: The sandbox's refusal to run a container, as podman reports it: the OCI runtime could not
#: set the container up (its namespaces, mounts, cgroups or rlimits) before anything of the
#: image ran. runc says ``runc create failed: unable to start container process: error during
#: container init: ...`` (this sandbox without CAP_SYS_RESOURCE: ``error setting rlimits``),
#: crun 1.8 ``cgroups in hybrid mode not supported``, a sandbox without user namespaces
#: ``cannot clone: Operation not permitted``. Only these skip the podman way.
SANDBOX_REFUSAL = re.compile(
    r"runc create failed: unable to start container process: error during container init"
    r"|cgroups in hybrid mode not supported"
    r"|cannot clone: operation not permitted",
    re.IGNORECASE,
)
#: The image's own fault, also reported by the runtime's init: its entrypoint is missing or
#: cannot be executed. Never a reason to skip.
IMAGE_FAULT = re.compile(r"exec: |executable file not found|exec format error", re.IGNORECASE)


def podman_refusal(code: int, stderr: str) -> str | None:
    """The skip reason when podman's probe failed on the sandbox's known refusal, else
    ``None`` (it ran, or it failed for a reason that is the image's or podman's: a failure)."""
    if code in (0, 1, 127) or IMAGE_FAULT.search(stderr) or not SANDBOX_REFUSAL.search(stderr):
        return None
    return f"this sandbox refuses to run containers: {stderr.strip()[-500:]}"


class PodmanRunner:
    """Rootful podman with runc and the host's network. Not crun: crun 1.8 refuses this
    sandbox's hybrid cgroup layout. Lower rlimits than podman's defaults: the sandbox lets no
    process raise its own (no CAP_SYS_RESOURCE)."""

    name = "podman"

    async def refused(self, ref: str) -> str | None:
        code, _, err = await _run(
            "podman", "run", "--rm", *PODMAN_FLAGS, "--entrypoint", "python", ref, "-c", "pass",
            check=False,
        )  # fmt: skip
        if code == 0:
            return None
        reason = podman_refusal(code, err)
        if reason is None:
            pytest.fail(
                f"podman could not run {ref} (exit {code}), and not for the sandbox's known "
                f"refusal of containers: a broken image or podman setup\n{err.strip()[-2000:]}",
                pytrace=False,
            )
        return reason

    @asynccontextmanager
    async def start(self, ref: str, env: dict[str, str], conf: Path) -> AsyncIterator[Started]:
        name = f"arcflow-test-{secrets.token_hex(4)}"
        argv = ["podman", "run", "--detach", "--name", name, *PODMAN_FLAGS]
        argv += ["--volume", f"{conf}:{CONF_DIR}:ro"]
        argv += [f"--env={key}={value}" for key, value in env.items()]
        await _run(*argv, ref)
        try:
            _, out, _ = await _run("podman", "inspect", "--format", "{{.State.Pid}}", name)
            yield PodmanStarted(name, int(out.strip()))
        finally:
            await _run("podman", "rm", "--force", "--time", "5", name, check=False)


@dataclass
class ChrootStarted:
    proc: asyncio.subprocess.Process
    log: Path
    pid: int

    async def logs(self) -> str:
        return self.log.read_text(errors="replace")

    async def stop(self) -> int:
        os.kill(self.pid, signal.SIGTERM)
        async with asyncio.timeout(30):
            return await self.proc.wait()


#: Runs in a private mount namespace (``unshare --mount``): the image's filesystem read-only at
#: $root, /tmp a tmpfs, the test's files at CONF_DIR, /proc and /dev; then the entrypoint as uid
#: 10001 with no new privileges. $1 the image's mounted filesystem, $2 an empty mount point,
#: $3 the test's files, $4 the working folder; the rest is the command.
CHROOT_SCRIPT = f"""
set -eu
src=$1 root=$2 conf=$3 workdir=$4; shift 4
mount --make-rprivate /
mount --bind "$src" "$root"
mkdir -p "$root{CONF_DIR}"  # in the working container's own layer, before the root is read-only
mount --bind -o ro "$conf" "$root{CONF_DIR}"
mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev tmpfs "$root/tmp"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -o remount,bind,ro "$root"
exec setpriv --no-new-privs chroot --userspec={UID}:{UID} "$root" \\
  /usr/bin/env -C "$workdir" "$@"
"""


class ChrootRunner:
    """The image's filesystem (a mounted buildah working container) and its entrypoint run in
    a chroot, no OCI runtime and no cgroups: the path where the sandbox refuses containers."""

    name = "chroot"

    async def refused(self, ref: str) -> str | None:
        for tool in ("unshare", "chroot", "setpriv", "mount"):
            if shutil.which(tool) is None:
                return f"{tool} is missing"
        return None

    @asynccontextmanager
    async def start(self, ref: str, env: dict[str, str], conf: Path) -> AsyncIterator[Started]:
        config = await image_config(ref)
        # As a container runtime does: the image's env, HOME from the image's passwd entry.
        env = {"HOME": "/nonexistent", "HOSTNAME": "arcflow-image-test", **config.env, **env}
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *config.entrypoint]
        mountpoint = conf.parent / f"root-{secrets.token_hex(4)}"
        log = mountpoint.with_suffix(".log")
        async with mounted_image(ref) as src:
            mountpoint.mkdir()
            with log.open("wb") as out:
                proc = await asyncio.create_subprocess_exec(
                    "unshare", "--mount", "--fork", "--kill-child", "--",
                    "sh", "-c", CHROOT_SCRIPT, "chroot-image",
                    str(src), str(mountpoint), str(conf), config.workdir, *command,
                    stdout=out, stderr=asyncio.subprocess.STDOUT,
                )  # fmt: skip
            try:

                async def entrypoint_pid() -> int:
                    assert proc.returncode is None, f"exited {proc.returncode}: {log.read_text()}"
                    task = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
                    children = task.read_text().split()
                    assert children, "unshare has not forked yet"
                    pid = int(children[0])
                    assert _uids(pid) == {UID}, f"pid {pid} has uids {_uids(pid)}: not past chroot"
                    return pid

                pid = await polling.eventually(
                    entrypoint_pid, within=START_WITHIN, what="the chrooted entrypoint as 10001"
                )
                yield ChrootStarted(proc, log, pid)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                mountpoint.rmdir()


RUNNERS: dict[str, Runner] = {"podman": PodmanRunner(), "chroot": ChrootRunner()}


@pytest.fixture(params=sorted(RUNNERS))
async def runner(request: pytest.FixtureRequest, images: dict[str, str]) -> Runner:
    """Each way of starting an image; one the sandbox refuses is skipped with the reason."""
    chosen = RUNNERS[request.param]
    reason = await chosen.refused(images["watcher"])
    if reason:
        pytest.skip(reason)
    return chosen


def _uids(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return {int(v) for v in line.split()[1:]}
    raise AssertionError(f"no Uid line for pid {pid}")


def _root_mount_options(pid: int) -> list[str]:
    """The mount options of the process's ``/`` (its mount namespace's view)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no / in pid {pid}'s mountinfo")


def _assert_as_the_charts_run_it(pid: int) -> None:
    assert _uids(pid) == {UID}, "the entrypoint runs as uid 10001 (runAsUser), never root"
    assert "ro" in _root_mount_options(pid), "the root filesystem is read-only"
    caps = {
        line.split()[0]: int(line.split()[1], 16)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("Cap")
    }
    assert caps["CapEff:"] == 0, "no capabilities (capabilities.drop: [ALL])"


@dataclass
class Files:
    """A folder mounted read-only at CONF_DIR: what a pod gets from its Secrets and ConfigMaps."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, text: str) -> str:
        path = self.folder / name
        path.write_text(text)
        path.chmod(0o644)  # read by uid 10001 in the container
        return f"{CONF_DIR}/{name}"


@pytest.fixture
def files(tmp_path_factory: pytest.TempPathFactory, kube_kubeconfig: str) -> Files:
    folder = tmp_path_factory.mktemp("image-files")
    for part in [folder, *folder.parents]:  # uid 10001 must reach the folder
        if part == Path("/"):
            break
        part.chmod(part.stat().st_mode | 0o711)
    conf = folder / "conf"
    conf.mkdir(mode=0o755)
    conf.chmod(0o755)
    found = Files(conf)
    kubeconfig = found.add("kubeconfig", _self_contained(Path(kube_kubeconfig)))
    found.env = {"ARCFLOW_KUBE_KUBECONFIG": kubeconfig, "ARCFLOW_KUBE_IN_CLUSTER": "false"}
    return found


def _self_contained(kubeconfig: Path) -> str:
    """The kubeconfig with its certificate files inlined (``*-data``): the paths it names are on
    this machine, not in the container."""
    config = yaml.safe_load(kubeconfig.read_text())
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(section, []):
            body = entry[key]
            for name in ("certificate-authority", "client-certificate", "client-key"):
                if name in body:
                    path = Path(body.pop(name))
                    if not path.is_absolute():
                        path = kubeconfig.parent / path
                    body[f"{name}-data"] = base64.b64encode(path.read_bytes()).decode()
    return yaml.safe_dump(config)


async def _http_ok(url: str) -> Callable[[], Awaitable[str]]:
    async def check() -> str:
        async with httpx.AsyncClient(timeout=5) as http:
            try:
                response = await http.get(url)
            except httpx.HTTPError as exc:
                raise AssertionError(f"{url}: {exc!r}") from exc
        assert response.status_code == 200, f"{url}: {response.status_code}"
        return response.text or "ok"

    return check


async def _wait(started: Started, check: Callable[[], Awaitable[Any]], what: str) -> Any:
    try:
        return await polling.eventually(check, within=START_WITHIN, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- its output:\n{(await started.logs())[-3000:]}") from None


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("service", SERVICES)
async def test_service_image_answers_its_health_endpoints(
    runner: Runner,
    images: dict[str, str],
    service: str,
    files: Files,
    nats_server: NatsServer,
    kube_namespace: str,
) -> None:
    health, metrics = free_port(), free_port()
    prefix = f"ARCFLOW_{service.upper()}_"
    env = {
        **files.env,
        "ARCFLOW_NATS_URL": nats_server.url,
        f"{prefix}HEALTH_HOST": "127.0.0.1",
        f"{prefix}HEALTH_PORT": str(health),
        f"{prefix}METRICS_HOST": "127.0.0.1",
        f"{prefix}METRICS_PORT": str(metrics),
        f"{prefix}NAMESPACES": kube_namespace,
    }
    async with runner.start(images[service], env, files.folder) as started:
        await _wait(
            started, await _http_ok(f"http://127.0.0.1:{health}/readyz"), f"{service} /readyz 200"
        )
        assert await (await _http_ok(f"http://127.0.0.1:{health}/healthz"))()
        await (await _http_ok(f"http://127.0.0.1:{metrics}/metrics"))()  # 200 (may be empty)
        _assert_as_the_charts_run_it(started.pid)
        code = await started.stop()
        logs = await started.logs()
    assert code == 0, logs[-3000:]
    assert f"{service} stopped" in logs


async def test_listener_image_starts_a_listener_from_its_config_file(
    runner: Runner,
    images: dict[str, str],
    files: Files,
    actions_sim: ActionsSimulator,
    kube_client: KubeClient,
    kube_namespace: str,
    nats_server: NatsServer,
) -> None:
    """The reconciler's listener pod in small: ``/ghalistener`` with ``LISTENER_CONFIG_PATH``,
    one scale set on the simulator, its EphemeralRunnerSet on the real kube-apiserver."""
    token = actions_sim.add_pat()
    async with ActionsClient(
        actions_sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
    ) as client:
        scale_set = await client.create_runner_scale_set(
            RunnerScaleSet(name="arc-image", labels=[Label(name="self-hosted-image")])
        )
    await kube_client.create(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {"name": "arc-image", "namespace": kube_namespace},
            "spec": {"replicas": 0, "patchID": 0},
        }
    )
    metrics = free_port()
    config = ListenerConfig(
        configure_url=actions_sim.config_url(),
        github_token=token,
        ephemeral_runner_set_namespace=kube_namespace,
        runner_scale_set_name="arc-image",
        metrics_addr=f"127.0.0.1:{metrics}",
        metrics_endpoint="/metrics",
        scale_sets=[
            ScaleSetConfig(
                runner_scale_set_id=scale_set.id,
                runner_scale_set_name="arc-image",
                ephemeral_runner_set_name="arc-image",
                min_runners=1,
                max_runners=2,
            )
        ],
    )
    env = {
        **files.env,
        "LISTENER_CONFIG_PATH": files.add("config.json", config.to_json()),
        "ARCFLOW_NATS_URL": nats_server.url,
    }
    async with runner.start(images["listener"], env, files.folder) as started:

        async def session_open() -> bool:
            sets = actions_sim.snapshot()["scaleSets"]
            assert any(s["id"] == scale_set.id and s["session"] for s in sets), sets
            return True

        async def min_runners_applied() -> bool:
            ers = await kube_client.get("EphemeralRunnerSet", "arc-image", kube_namespace)
            assert ers["spec"].get("replicas") == 1, ers["spec"]
            return True

        await _wait(started, session_open, "the listener's message session is open")
        await _wait(started, min_runners_applied, "the listener patched its ERS to minRunners")
        assert "# TYPE" in await (await _http_ok(f"http://127.0.0.1:{metrics}/metrics"))()
        _assert_as_the_charts_run_it(started.pid)
        code = await started.stop()
        logs = await started.logs()
    assert code == 0, logs[-3000:]
    assert "message session open" in logs
    assert token not in logs
    assert all(s["session"] is None for s in actions_sim.snapshot()["scaleSets"])
