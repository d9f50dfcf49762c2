"""An ARS whose githubConfigUrl points nowhere (issue #23: "stays Pending with no condition and
no Event"): within 10 s its ``ScaleSetsRegistered`` condition is False with reason
``GitHubUnreachable`` and a Warning Event says why; ``arcflow doctor`` names the set and exits 1,
after exiting 0 on the same stack while it was healthy; ``-o json`` parses. The healthy ARS
beside it is not affected (ADR 0064)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EVENT
from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack, burst_ars
from tests.chaos.outcome import Burst
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

BAD = "nowhere"
#: The issue's bound: the condition and the Event within 10 s of the ARS.
WITHIN = 10.0


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def doctor(stack: ChaosStack, *args: str) -> tuple[int, str, str]:
    """``arcflow doctor`` as a user runs it, against the stack's cluster and NATS."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "arcflow.cli.main", "doctor",
        "--kubeconfig", stack.kubeconfig, "--nats-url", stack.nats_url,
        "--namespace", stack.namespace, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def kubectl_get_ars(stack: ChaosStack) -> dict[str, dict[str, str]]:
    """``kubectl get ars`` as a user runs it: NAME -> column -> cell."""
    kubectl = Path(sys.executable).parent / "kubectl"
    process = await asyncio.create_subprocess_exec(
        str(kubectl), "--kubeconfig", stack.kubeconfig, "get", "ars", "-n", stack.namespace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    # Cells start where their header starts (an empty cell is blank, so split by position).
    header, *lines = out.decode().splitlines()
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return {
        line[: starts[1]].strip(): {
            name: line[a:b].strip()
            for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in lines
    }


async def test_unreachable_config_url_shows_on_the_set_and_in_doctor(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        kube = stack.kube
        assert kube is not None
        burst = Burst(stack)
        burst.enqueue(6)
        await burst.wait_completed(6, within=90)

        async def healthy() -> bool:
            code, out, err = await doctor(stack)
            assert code == 0, f"doctor exit {code} on the healthy stack:\n{out}\n{err}"
            return True

        # A healthy stack: exit 0 (once the burst's runners are cleared).
        await eventually(healthy, within=60, interval=1.0, what="doctor exit 0")

        bad = burst_ars(f"http://127.0.0.1:{closed_port()}/acme", namespace=stack.namespace)
        bad["metadata"]["name"] = BAD
        applied = time.monotonic()
        await kube.create(bad)

        async def condition() -> dict[str, Any]:
            ars = await kube.get(AUTOSCALING_RUNNER_SET, BAD, stack.namespace)
            found = [
                c
                for c in (ars.get("status") or {}).get("conditions") or []
                if c.get("type") == "ScaleSetsRegistered"
            ]
            assert found, f"no ScaleSetsRegistered condition: {ars.get('status')}"
            return dict(found[0])

        seen = await eventually(condition, within=WITHIN, what="the ScaleSetsRegistered condition")
        condition_after = time.monotonic() - applied

        async def warning() -> dict[str, Any]:
            events = (await kube.list(EVENT, namespace=stack.namespace)).items
            mine = [
                e
                for e in events
                if (e.get("involvedObject") or {}).get("name") == BAD
                and e.get("type") == "Warning"
                and e.get("reason") == "GitHubUnreachable"
            ]
            assert mine, "no Warning Event GitHubUnreachable on the ARS"
            return dict(mine[0])

        event = await eventually(warning, within=WITHIN, what="the Warning Event")
        event_after = time.monotonic() - applied
        assert seen["status"] == "False"
        assert seen["reason"] == "GitHubUnreachable"
        assert "127.0.0.1" in seen["message"] or "connect" in seen["message"].lower()
        assert event["message"] == seen["message"]

        # kubectl get ars: the Registration printer column shows the reason.
        rows = await kubectl_get_ars(stack)
        assert rows[BAD].get("REGISTRATION") == "GitHubUnreachable", rows
        assert rows["burst"].get("REGISTRATION") in ("<none>", ""), rows
        assert rows[BAD].get("PHASE") == "Pending", rows

        code, out, err = await doctor(stack)
        assert code == 1, f"doctor exit {code}:\n{out}\n{err}"
        assert f"STUCK  {stack.namespace}/{BAD}" in out
        assert "GitHubUnreachable" in out
        assert f"ok     {stack.namespace}/burst" in out
        code, out, _ = await doctor(stack, "-o", "json")
        assert code == 1
        report = json.loads(out)
        assert report["healthy"] is False
        stuck = {(f["ars"], f["check"]) for f in report["findings"]}
        assert (BAD, "condition") in stuck
        assert all(f["ars"] == BAD for f in report["findings"]), report["findings"]
        by_name = {s["name"]: s["healthy"] for s in report["sets"]}
        assert by_name == {"burst": True, BAD: False}

        # The healthy set beside it still runs jobs.
        more = Burst(stack)
        more.enqueue(3)
        await more.wait_completed(3, within=60)
        print(
            json.dumps(
                {
                    "condition after": round(condition_after, 2),
                    "event after": round(event_after, 2),
                    "doctor findings": len(report["findings"]),
                }
            )
        )
