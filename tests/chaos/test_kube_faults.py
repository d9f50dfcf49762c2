"""Kubernetes misbehaves in the middle of a burst: writes refused with 409 and 500, every
watch dropped, history compacted so resumed watches get 410, and the API server restarted.

On the test session's real kube-apiserver. Every client of the stack (the services, the pod
runner and the listeners) reaches it through the factory's :class:`ApiProxy`, which gives the
HTTP faults a real server cannot be told to give on a chosen request: the refused writes (a
``Status`` with that code instead of forwarding), cut watches (the TCP connection closed
mid-stream) and the ``410 Expired`` a compacted etcd answers a watch resuming from an older
resourceVersion. The restart is real: :meth:`ControlPlane.restart_apiserver` stops
kube-apiserver and starts it again on the same port and etcd (on the emulator, its restart)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from arcflow.common.kube import NAMESPACE
from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import figures_after, report, run_burst

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_kubernetes_faults_mid_burst(tmp_path: Path, chaos_kube: ControlPlane | str) -> None:
    async with ChaosStack(tmp_path, chaos_kube, auth="app", proxy=True) as stack:
        proxy = stack.api_proxy
        assert proxy is not None
        assert stack.kube is not None
        kube = stack.kube
        injected = []
        dropped: list[int] = []

        async def write_errors() -> None:
            for verb, resource, status, reason in (
                ("create", "pods", 500, "InternalError"),
                ("create", "secrets", 500, "InternalError"),
                ("create", "ephemeralrunners", 500, "InternalError"),
                ("patch", "ephemeralrunnersets", 409, "Conflict"),
                ("patch", "ephemeralrunners", 409, "Conflict"),
                ("delete", "ephemeralrunners", 500, "InternalError"),
            ):
                injected.append(
                    proxy.inject(
                        verb=verb,
                        resource=resource,
                        status=status,
                        reason=reason,
                        message=f"chaos: {verb} {resource} refused",
                        times=5,
                    )
                )

        async def dropped_watches() -> None:
            dropped.append(proxy.drop_watches())

        async def expired_history() -> None:
            # Everything up to the server's current resourceVersion is compacted away.
            current = (await kube.list(NAMESPACE)).resource_version
            proxy.expire_before(int(current) + 1)
            dropped.append(proxy.drop_watches())

        async def restart() -> None:
            if stack.control_plane is not None:
                await asyncio.to_thread(stack.control_plane.restart_apiserver)
            else:
                assert stack.emulator is not None
                await stack.emulator.restart()

        began = time.monotonic()
        burst, back_after, last_event = await run_burst(
            stack,
            [
                ("409 and 500 on writes", write_errors),
                ("watches dropped", dropped_watches),
                ("410 on resumed watches", expired_history),
                ("API server restarted", restart),
            ],
        )
        figures = await figures_after(burst, last_event=last_event)
        report("Kubernetes faults", began, back_after, figures)
        refused = {f"{f.verb} {f.resource} {f.status}": f.hits for f in injected}
        print(
            json.dumps(
                {
                    "backend": "apiserver" if stack.on_real_server else "emulator",
                    "requests refused": refused,
                    "watches dropped": dropped,
                    "requests by client": {c: sum(n.values()) for c, n in proxy.counts.items()},
                }
            )
        )
        assert all(refused.values()), f"a write fault was never hit: {refused}"
        assert all(dropped), f"no watch was open to drop: {dropped}"
        assert figures.restarts == {"watcher": 0, "registrar": 0, "reconciler": 0}
        assert figures.problems() == []
