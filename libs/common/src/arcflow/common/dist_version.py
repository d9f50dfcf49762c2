"""The version of an installed distribution, read without ``importlib.metadata``.

``importlib.metadata`` pulls in ``email`` (to parse METADATA), ``zipfile``, ``csv`` and
friends: about 3.5 MiB of RSS and tens of milliseconds in a process that only wants one
version string for a User-Agent (issue 14: the listener imports only what it runs). An
installed distribution is a ``<name>-<version>.dist-info`` directory on ``sys.path`` whose
``METADATA`` file has a ``Version:`` header (the core metadata format); that is all this
module reads. Anything else (an egg, a zip) falls back to ``importlib.metadata``.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache

_SEPARATORS = re.compile(r"[-_.]+")


def _normalized(name: str) -> str:
    return _SEPARATORS.sub("_", name).lower()


def _from_dist_info(name: str) -> str | None:
    wanted = _normalized(name)
    for entry in sys.path:
        try:
            children = os.listdir(entry or ".")
        except OSError:
            continue
        for child in children:
            # <name>-<version>.dist-info: the name is everything before the last dash.
            if not child.endswith(".dist-info"):
                continue
            if _normalized(child.removesuffix(".dist-info").rsplit("-", 1)[0]) != wanted:
                continue
            try:
                with open(os.path.join(entry, child, "METADATA"), encoding="utf-8") as handle:
                    for line in handle:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break  # end of the headers
            except OSError:
                continue
    return None


@cache
def distribution_version(name: str) -> str | None:
    """``name``'s installed version, or ``None`` when it is not installed."""
    found = _from_dist_info(name)
    if found is not None:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None
