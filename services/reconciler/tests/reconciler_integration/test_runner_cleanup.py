"""A deleted runner's Pod and JIT Secret are deleted by the reconciler, not left to the garbage
collector (ADR 0057): on a real cluster the collector is rate-limited, and the Pods and Secrets
of a scaled-down set lingered for seconds after their runners."""

from __future__ import annotations

import pytest

from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

RUNNERS = 5


async def _registered(stack: Stack) -> list[str]:
    async def check() -> list[str] | None:
        runners = await stack.list("EphemeralRunner")
        pods = {p["metadata"]["name"] for p in await stack.list("Pod")}
        names = [r["metadata"]["name"] for r in runners]
        ready = (
            len(runners) == RUNNERS
            and all((r.get("status") or {}).get("runnerId") for r in runners)
            and pods >= set(names)
        )
        return names if ready else None

    result: list[str] = await eventually(check, what=f"{RUNNERS} registered runners with pods")
    return result


async def test_scaled_down_runners_take_their_pods_and_secrets_with_them(stack: Stack) -> None:
    await stack.register("tidy", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "tidy"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers, what="the runner set")
    await stack.scale("tidy", RUNNERS, 0)
    names = set(await _registered(stack))
    for name in names:  # idle: online, no job (the listener would report one)
        await stack.set_runner_status(name, {"phase": "Running"})

    await stack.scale("tidy", 0, 0)

    async def all_gone() -> bool:
        left = {
            f"{kind} {o['metadata']['name']}"
            for kind in ("EphemeralRunner", "Pod", "Secret")
            for o in await stack.list(kind)
            if o["metadata"]["name"] in names
        }
        assert not left, f"still there: {sorted(left)}"
        return True

    await eventually(all_gone, within=15, what="the runners, their pods and JIT Secrets gone")
    deleted = {
        (event.kind, event.name)
        for event in await stack.audit_events()
        if event.action == "deleted"
    }
    for name in names:
        # The reconciler's own deletes, each an audit event; the collector writes none.
        assert ("Pod", name) in deleted, f"pod {name} was not deleted by the reconciler"
        assert ("Secret", name) in deleted, f"JIT Secret {name} was not deleted by it"
