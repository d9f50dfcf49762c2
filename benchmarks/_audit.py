"""API requests per user, verb and resource from a kube-apiserver audit log, in a time window.

Not a test. The real control plane of the benchmarks runs with ``audit=True``
(:class:`arcflow.devstack.control_plane.ControlPlane`): one JSON line per request at Metadata
level, naming the authenticated user (``admin`` for the admin certificate the services and the
pod runner use through the counting proxy, ``system:serviceaccount:<ns>:<name>`` for a
listener's own token, ``system:kube-controller-manager`` and its controllers' ServiceAccounts),
the verb, the resource and subresource. This counts what the *server* saw, beside what the
counting proxy saw per client.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def audit_counts(path: Path, *, since: float = 0.0, until: float | None = None) -> dict[str, Any]:
    """``{"total": n, "by_user": {user: n}, "by_user_verb_resource": {user: {"verb res": n}}}``
    for the requests received in ``[since, until]`` (``time.time()`` seconds)."""
    by_user: Counter[str] = Counter()
    detail: dict[str, Counter[str]] = {}
    served: dict[str, Counter[str]] = {}  # user -> "verb resource" -> server seconds, summed
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line being written
        received = _seconds(str(event.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z"))
        if received < since or (until is not None and received > until):
            continue
        user = str((event.get("user") or {}).get("username") or "?")
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource") or event.get("requestURI", "?").split("?")[0])
        if ref.get("subresource"):
            resource += "/" + str(ref["subresource"])
        by_user[user] += 1
        request = f"{event.get('verb', '?')} {resource}"
        detail.setdefault(user, Counter())[request] += 1
        if event.get("stageTimestamp") and not request.startswith("watch"):
            seconds = _seconds(str(event["stageTimestamp"])) - received
            served.setdefault(user, Counter())[request] += max(0.0, seconds)
    return {
        "total": sum(by_user.values()),
        "by_user": dict(by_user.most_common()),
        "by_user_verb_resource": {u: dict(sorted(c.items())) for u, c in sorted(detail.items())},
        # Mean milliseconds from the request's arrival to its response, as the server logged
        # them: how long the server itself took (a slow write here is the server's, not ours).
        "server_ms_by_user_verb_resource": {
            u: {r: round(1000 * s / detail[u][r], 1) for r, s in sorted(c.items())}
            for u, c in sorted(served.items())
        },
    }


__all__ = ["audit_counts"]
