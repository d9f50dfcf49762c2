"""What a node leaves behind on the host, and its removal (docs/node.md, "Teardown").

Containers a runtime starts live in cgroups of their own (here under the node's cgroup root in
every v1 hierarchy), outside the test's: they outlive a test unless found and stopped. The
mounts (overlay root filesystems, pod volumes, shm) are in the host's mount namespace, under
the node's folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
#: Where the kubelet links each container's log, whatever its pod logs folder (a fixed path).
CONTAINER_LOG_LINKS = Path("/var/log/containers")
#: Paths the parts use whatever they are told: the kubelet's device plugin socket and
#: containerd's shim sockets (each shim removes its own). The teardown removes the kubelet's
#: socket and these folders when they are empty. (The CNI library also caches results in
#: /var/lib/cni/results, shared with podman: each entry goes with its pod, the folder stays.)
FIXED_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
FIXED_FOLDERS = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/lib/kubelet"),
    Path("/run/containerd/s"),
    Path("/run/containerd"),
)


def hierarchies() -> list[Path]:
    """Every cgroup hierarchy mounted under /sys/fs/cgroup (v1 ones and the unified one),
    each once (``cpu,cpuacct`` style links resolved)."""
    seen: dict[Path, None] = {}
    with contextlib.suppress(OSError):
        for entry in sorted(CGROUP_FS.iterdir()):
            if entry.is_dir():
                seen.setdefault(entry.resolve())
    return list(seen)


def cgroup_dirs(root: str) -> list[Path]:
    """The node's cgroup root in each hierarchy where it exists."""
    return [h / root.strip("/") for h in hierarchies() if (h / root.strip("/")).is_dir()]


def cgroup_pids(root: str) -> set[int]:
    """Every process in the node's cgroups (the containers, their pause processes)."""
    pids: set[int] = set()
    for top in cgroup_dirs(root):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(line) for line in procs.read_text().split())
    return pids


def kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def remove_cgroups(root: str) -> None:
    """Remove the node's cgroup folders in every hierarchy, deepest first (a cgroup folder is
    removed with rmdir once no process and no child is left in it)."""
    for top in cgroup_dirs(root):
        folders = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for folder in [*folders, top]:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mounts_under(folders: Iterable[Path]) -> list[Path]:
    """Mount points (of the host's mount namespace) at or below any of ``folders``."""
    roots = [str(f.resolve()) for f in folders]
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = _unescape(line.split()[4])
            if any(point == r or point.startswith(r + "/") for r in roots):
                found.append(Path(point))
    return found


def unmount_under(folders: Iterable[Path]) -> None:
    """Unmount everything below ``folders``, deepest first; lazily when a mount is busy."""
    folders = list(folders)
    for _ in range(3):
        points = sorted(set(mounts_under(folders)), key=lambda p: -len(p.parts))
        if not points:
            return
        for point in points:
            done = subprocess.run(["umount", str(point)], capture_output=True, check=False)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def processes_mentioning(text: str) -> list[int]:
    """Processes whose command line names ``text`` (the node's folder): a containerd shim
    left behind names the containerd socket it serves."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace"
            ):
                pids.append(int(entry.name))
    return pids


def log_links_into(folder: Path) -> list[Path]:
    """The kubelet's links in /var/log/containers that point into ``folder``."""
    root = str(folder.resolve())
    found = []
    with contextlib.suppress(OSError):
        for link in CONTAINER_LOG_LINKS.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and str(link.readlink()).startswith(root + "/"):
                    found.append(link)
    return found


def remove_fixed_paths(folder: Path) -> None:
    """Remove the kubelet's log links into ``folder``, its device plugin socket, and the fixed
    folders the parts made when nothing is left in them."""
    for link in log_links_into(folder):
        link.unlink(missing_ok=True)
    FIXED_SOCKET.unlink(missing_ok=True)
    for path in FIXED_FOLDERS:
        with contextlib.suppress(OSError):
            path.rmdir()
