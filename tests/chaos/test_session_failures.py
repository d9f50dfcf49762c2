"""A listener that cannot open a message session shows on its set (issue #23 item 3; ADR 0064,
amendment "Listener sessions"): the simulator answers every session create of one ARS's scale
sets with 409 (a conflicting session); within a deadline the ARS's ``ListenerSessionsOpen``
condition is False with reason ``SessionConflict``, a Warning Event names the variant, ``kubectl
get ars`` shows it in the ``Sessions`` column and ``arcflow doctor`` names it, while the sibling
ARS beside it keeps its sessions, gets no condition and runs jobs. Once the fault is cleared
the condition turns True (``SessionsOpen``) with a Normal Event.

The condition is level-based (ADR 0073): a reconciler restarted while it is False forgets every
``session.failed`` it saw, yet keeps it False while a variant has no session (the listener's
sessions bucket says which are open) and turns it True once every variant's is open.

The fault is scoped to the new ARS's scale sets by path: the simulator numbers scale sets one
after another, so the two created for the new ARS take the next two ids."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EVENT, POD
from arcflow.common.nats.jetstream import STREAM_ERRORS
from arcflow.common.subjects import errors_subject
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.demo import variant_targets
from tests.chaos.harness import ChaosStack, burst_ars
from tests.chaos.outcome import Burst
from tests.chaos.test_unreachable_config_url import doctor, kubectl_get_ars
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

NAME = "sessionless"
VARIANTS = ("left", "right")
CONDITION = "ListenerSessionsOpen"
#: From the ARS's creation: registration, the listener pod, its first failed create, the
#: event, the reconciler's pass (each a few seconds on a loaded 2-core machine).
WITHIN = 60.0
#: From clearing the fault: the supervisor's backoff (at most 5 s) plus the pass.
RECOVERY_WITHIN = 30.0


def sessionless_ars(config_url: str, namespace: str) -> dict[str, Any]:
    ars = burst_ars(config_url, namespace=namespace, max_runners=4)
    ars["metadata"]["name"] = NAME
    ars["spec"]["runnerVariants"] = [
        {"name": v, "runnerScaleSetLabels": ["linux", f"{NAME}-{v}"]} for v in VARIANTS
    ]
    return ars


def refuse_sessions(sim: ActionsSimulator, scale_set_id: int) -> None:
    """Answer every session create of ``scale_set_id`` with 409 (a conflicting session)."""
    sim.inject_status(
        f"*/runnerscalesets/{scale_set_id}/sessions",
        409,
        method="POST",
        times=100_000,
        type_name="RunnerScaleSetSessionConflictException",
    )


async def restart_reconciler(stack: ChaosStack, *, then: Any = None) -> float:
    """SIGKILL the reconciler (its memory of session events goes with it); ``then()`` runs
    at once, before the new process starts. Returns when the new one is healthy (monotonic)."""
    service = stack.services["reconciler"]
    before = service.restarts
    service.kill()
    if then is not None:
        then()

    async def restarted() -> bool:
        return service.restarts > before and service.alive

    await eventually(restarted, within=30, what="reconciler restarted")
    await service.wait_healthy(within=60)
    return time.monotonic()


async def sessions_said(stack: ChaosStack, ars: str) -> list[dict[str, Any]]:
    """Every ``session.failed``/``session.opened`` stored for ``ars`` on ``ARC_ERRORS``."""
    nc = await nats.connect(stack.nats_url)
    try:
        js = nc.jetstream(timeout=10)
        config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
        sub = await js.pull_subscribe(
            errors_subject(stack.namespace, ars), stream=STREAM_ERRORS.name, config=config
        )
        found: list[dict[str, Any]] = []
        while True:
            try:
                batch = await sub.fetch(100, timeout=1)
            except (NatsTimeoutError, TimeoutError):
                break
            found += [json.loads(m.data) for m in batch]
        return [e for e in found if str(e.get("type", "")).startswith("session.")]
    finally:
        await nc.close()


def condition_of(ars: dict[str, Any]) -> dict[str, Any] | None:
    found = [
        c for c in (ars.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION
    ]
    return dict(found[0]) if found else None


async def test_refused_sessions_show_on_the_set_and_clear(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        kube, sim = stack.kube, stack.sim
        assert kube is not None
        assert sim is not None
        control = httpx.AsyncClient(base_url=f"{sim.base_url}/_sim", timeout=10.0)
        async with control:
            first = max(int(s["id"]) for s in stack.scale_sets()) + 1
            for scale_set_id in range(first, first + len(VARIANTS)):
                answer = await control.post(
                    "/faults/status",
                    json={
                        "route": f"*/runnerscalesets/{scale_set_id}/sessions",
                        "status": 409,
                        "method": "POST",
                        "times": 100_000,
                        "type_name": "RunnerScaleSetSessionConflictException",
                    },
                )
                assert answer.status_code == 201, answer.text
            applied = time.monotonic()
            await kube.create(sessionless_ars(sim.config_url(), stack.namespace))

            async def failing() -> dict[str, Any]:
                seen = condition_of(await kube.get(AUTOSCALING_RUNNER_SET, NAME, stack.namespace))
                assert seen is not None, f"no {CONDITION} condition yet"
                assert seen["status"] == "False", seen
                # Both variants fail; the first by name gives the reason, the other is named.
                assert "also failing: right" in seen["message"], seen
                return seen

            seen = await eventually(
                failing, within=WITHIN, interval=0.5, what=f"{CONDITION}=False on {NAME}"
            )
            condition_after = time.monotonic() - applied
            names = {s["name"]: int(s["id"]) for s in stack.scale_sets()}
            assert set(range(first, first + len(VARIANTS))) <= set(names.values()), (
                f"the new ARS's scale sets did not get ids {first}.. as predicted: {names}"
            )
            assert seen["reason"] == "SessionConflict", seen
            assert seen["message"].startswith("variant left: "), seen
            assert "SessionConflictError" in seen["message"], seen

            async def warning() -> dict[str, Any]:
                events = (await kube.list(EVENT, namespace=stack.namespace)).items
                mine = [
                    e
                    for e in events
                    if (e.get("involvedObject") or {}).get("name") == NAME
                    and e.get("type") == "Warning"
                    and e.get("reason") == "SessionConflict"
                    and e.get("message") == seen["message"]
                ]
                assert mine, f"no Warning Event SessionConflict saying {seen['message']!r}"
                return dict(mine[0])

            await eventually(warning, within=30, interval=0.5, what="the Warning Event")

            rows = await kubectl_get_ars(stack)
            assert rows[NAME].get("SESSIONS") == "SessionConflict", rows
            assert rows["burst"].get("SESSIONS") in ("<none>", ""), rows

            code, out, err = await doctor(stack)
            assert code == 1, f"doctor exit {code}:\n{out}\n{err}"
            assert f"{CONDITION}=False (SessionConflict)" in out, out
            assert f"ok     {stack.namespace}/burst" in out, out

            # The sibling ARS keeps its sessions and its runners: no condition, jobs run.
            burst = await kube.get(AUTOSCALING_RUNNER_SET, "burst", stack.namespace)
            assert condition_of(burst) is None, burst.get("status")
            more = Burst(stack)
            more.enqueue(3)
            await more.wait_completed(3, within=90)

            cleared = await control.delete("/faults")
            assert cleared.status_code == 200, cleared.text
            fixed = time.monotonic()

            async def recovered() -> dict[str, Any]:
                now = condition_of(await kube.get(AUTOSCALING_RUNNER_SET, NAME, stack.namespace))
                assert now is not None
                assert now["status"] == "True", now
                return now

            now = await eventually(
                recovered, within=RECOVERY_WITHIN, interval=0.5, what=f"{CONDITION}=True"
            )
            recovery_after = time.monotonic() - fixed
            assert now["reason"] == "SessionsOpen", now
            with_session = {s["name"] for s in stack.scale_sets() if s.get("session")}
            assert {n for n, i in names.items() if i >= first} <= with_session

            async def normal() -> dict[str, Any]:
                events = (await kube.list(EVENT, namespace=stack.namespace)).items
                mine = [
                    e
                    for e in events
                    if (e.get("involvedObject") or {}).get("name") == NAME
                    and e.get("type") == "Normal"
                    and e.get("reason") == "SessionsOpen"
                ]
                assert mine, f"no Normal Event SessionsOpen on {NAME}"
                return dict(mine[0])

            await eventually(normal, within=30, interval=0.5, what="the Normal Event")
            warnings = [
                e
                for e in (await kube.list(EVENT, namespace=stack.namespace)).items
                if (e.get("involvedObject") or {}).get("name") == NAME
                and e.get("reason") == "SessionConflict"
            ]
            # Not one per retry: a Warning when the condition's message changes (a variant
            # starts or, on recovery, stops failing before the other), at most two per variant,
            # while the listener retried each create every 1-5 s.
            asked = await control.get(
                "/requests", params={"route": "*/runnerscalesets/*/sessions", "method": "POST"}
            )
            refused = [r for r in asked.json()["requests"] if r.get("status") == 409]
            count = sum(int(e.get("count") or 1) for e in warnings)
            assert count <= 2 * len(VARIANTS), warnings
            assert len(refused) > count, (len(refused), count)
            print(
                json.dumps(
                    {
                        "condition after": round(condition_after, 2),
                        "recovered after": round(recovery_after, 2),
                        "refused creates": len(refused),
                        "warning events": count,
                    }
                )
            )


async def test_a_restarted_reconciler_follows_the_sessions(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    """Both variants refused, the reconciler restarted (every ``session.failed`` it saw is
    forgotten), then ``right`` opens while ``left`` stays refused: the condition stays False
    and names only ``left``. Restarted again with every fault cleared while it is down, it
    turns True from what the sessions are, not from events it remembers. A recreated listener
    pod says ``session.opened`` for every variant again."""
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        kube, sim = stack.kube, stack.sim
        assert kube is not None
        assert sim is not None
        first = max(int(s["id"]) for s in stack.scale_sets()) + 1
        for scale_set_id in range(first, first + len(VARIANTS)):
            refuse_sessions(sim, scale_set_id)
        ars = sessionless_ars(sim.config_url(), stack.namespace)
        await kube.create(ars)

        async def current() -> dict[str, Any]:
            seen = condition_of(await kube.get(AUTOSCALING_RUNNER_SET, NAME, stack.namespace))
            assert seen is not None, f"no {CONDITION} condition yet"
            return seen

        async def both_failing() -> dict[str, Any]:
            seen = await current()
            assert seen["status"] == "False", seen
            assert "also failing: right" in seen["message"], seen
            return seen

        await eventually(both_failing, within=WITHIN, interval=0.5, what="both variants failing")
        # Which of the two ids each variant got depends on the registration order.
        names = {s["name"]: int(s["id"]) for s in stack.scale_sets()}
        ids = {t.variant: names[t.scale_set_name] for t in variant_targets(ars)}
        assert set(ids.values()) == {first, first + 1}, (ids, names)

        # 1. The memory of both failures is lost; right opens, left is still refused.
        def only_left_refused() -> None:
            sim.clear_faults()  # in this process: no create slips between the two calls
            refuse_sessions(sim, ids["left"])

        await restart_reconciler(stack, then=only_left_refused)

        async def right_open() -> bool:
            sets = stack.scale_sets()
            return any(int(s["id"]) == ids["right"] and s.get("session") for s in sets)

        await eventually(right_open, within=RECOVERY_WITHIN, what="a session for right")
        opened = time.monotonic()

        async def left_only() -> dict[str, Any]:
            seen = await current()
            if seen["status"] != "False":
                pytest.fail(f"{CONDITION} is {seen['status']} while left has no session: {seen}")
            assert seen["message"].startswith("variant left: "), seen
            assert "right" not in seen["message"], seen
            return seen

        await eventually(left_only, within=RECOVERY_WITHIN, interval=0.5, what="only left failing")
        left_only_after = time.monotonic() - opened
        # It stays so: the next passes (a status change, the resync) do not turn it True.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            await left_only()
            await asyncio.sleep(0.5)

        # 2. Restarted again; the last fault is cleared while no reconciler runs.
        healthy = await restart_reconciler(stack, then=sim.clear_faults)

        async def recovered() -> dict[str, Any]:
            seen = await current()
            assert seen["status"] == "True", seen
            return seen

        seen = await eventually(
            recovered, within=RECOVERY_WITHIN, interval=0.5, what=f"{CONDITION}=True"
        )
        converged_after = time.monotonic() - healthy
        assert seen["reason"] == "SessionsOpen", seen

        # 3. The listener's pod is deleted and made again: the new process's pumps say
        # session.opened for every variant (each pump starts with nothing said), and the
        # condition stays True.
        before = await sessions_said(stack, NAME)
        controller = f"{stack.namespace}-systems" if stack.on_real_server else "arc-systems"
        pods = [
            p
            for p in (await kube.list(POD, namespace=controller)).items
            if NAME in p["metadata"]["name"]
        ]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        old_uid = pods[0]["metadata"]["uid"]
        await kube.delete(POD, pods[0]["metadata"]["name"], namespace=controller)

        async def said_again() -> list[dict[str, Any]]:
            new = (await sessions_said(stack, NAME))[len(before) :]
            opened = {e.get("scale_set_id") for e in new if e.get("type") == "session.opened"}
            assert opened >= set(ids.values()), (opened, new)
            return new

        new = await eventually(said_again, within=90, interval=1, what="session.opened again")
        assert not [e for e in new if e.get("type") == "session.failed"], new
        recreated = [
            p
            for p in (await kube.list(POD, namespace=controller)).items
            if NAME in p["metadata"]["name"]
        ]
        assert [p["metadata"]["uid"] for p in recreated] != [old_uid], recreated
        seen = await recovered()
        assert seen["reason"] == "SessionsOpen", seen
        print(
            json.dumps(
                {
                    "left only after right opened": round(left_only_after, 2),
                    "true after the restarted reconciler was healthy": round(converged_after, 2),
                }
            )
        )
