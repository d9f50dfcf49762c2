"""Images for the node's containerd: no registry is reachable, so each image a pod uses is
built here with buildah, exported to an archive (cached by image id) and imported with ``ctr``.

The sandbox (pause) image is Debian's static ``catatonit`` in an image of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

PAUSE_IMAGE = "localhost/arcflow/pause:catatonit"
CATATONIT = Path("/usr/bin/catatonit")


class ImageError(RuntimeError):
    """An image could not be built, exported or imported."""


def _run(args: Sequence[str]) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageError(f"{' '.join(args)}: {(done.stderr or done.stdout).strip()[-800:]}")
    return done.stdout.strip()


def image_id(image: str) -> str | None:
    done = subprocess.run(
        ["buildah", "images", "--noheading", "--no-trunc", "--format", "{{.ID}}", image],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.split()
    return lines[0].removeprefix("sha256:") if done.returncode == 0 and lines else None


def ensure_pause_image() -> str:
    """Build the pause image from ``catatonit`` once (kept in buildah's store)."""
    if image_id(PAUSE_IMAGE) is None:
        if not CATATONIT.is_file():
            raise ImageError(
                f"no {CATATONIT}: install Debian's catatonit (apt-get install catatonit)"
            )
        container = _run(["buildah", "from", "scratch"])
        try:
            _run(["buildah", "copy", container, str(CATATONIT), "/catatonit"])
            _run(["buildah", "config", "--entrypoint", '["/catatonit", "-P"]', container])
            _run(["buildah", "commit", "--quiet", container, PAUSE_IMAGE])
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    return PAUSE_IMAGE


def export(image: str, cache: Path) -> Path:
    """A docker archive of ``image`` in ``cache``, named by its image id: a rebuilt image gets
    a new archive, an unchanged one is reused."""
    ident = image_id(image)
    if ident is None:
        raise ImageError(f"no image {image} in buildah's store (scripts/build-images.sh builds it)")
    tag = hashlib.sha256(image.encode()).hexdigest()[:8]
    archive = cache / f"{ident[:16]}-{tag}.tar"
    if not archive.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        for stale in cache.glob(f"*-{tag}.tar"):
            stale.unlink(missing_ok=True)
        # Two test workers may export the same image at once: each writes its own partial
        # file and moves it into place atomically; whichever lands last wins, same content.
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        partial.unlink(missing_ok=True)
        _run(["buildah", "push", "--quiet", image, f"docker-archive:{partial}:{image}"])
        os.replace(partial, archive)
    return archive


def import_archive(ctr: Path, socket: Path, archive: Path) -> None:
    _run([str(ctr), "--address", str(socket), "-n", "k8s.io", "images", "import", str(archive)])


def buildah_missing() -> bool:
    return shutil.which("buildah") is None


#: The runner image ``scripts/build-images.sh`` builds (the Dockerfile's ``runner`` target; ADR
#: 0091), tagged with the charts' appVersion like the four chart images.
RUNNER_REPOSITORY = "localhost/arcflow/runner"


def runner_image(chart_image: str) -> str:
    """The runner image of the same build as ``chart_image`` (any of the four, same tag)."""
    return f"{RUNNER_REPOSITORY}:{chart_image.rpartition(':')[2]}"
