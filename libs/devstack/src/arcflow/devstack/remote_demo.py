"""The dev stack's demo against servers that run elsewhere (``docker compose``): apply the
example ARS with a fresh simulator PAT, wait for its scale sets, queue the demo jobs and wait
until they completed. ``arcflow sim demo`` runs it; ``arcflow dev`` does the same in process.

Only the simulator's control API and the Kubernetes API are used, so this works against any
stack whose watcher, registrar, reconciler and pod runner run somewhere else."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import ConflictError, KubeClient
from arcflow.devstack import demo


class RemoteDemoError(RuntimeError):
    """The demo could not run or did not finish; the message says where it stopped."""


@dataclass(frozen=True)
class RemoteDemoOptions:
    actions_url: str
    example: Path
    jobs: int = 12
    org: str | None = None
    timeout: float = 600.0
    poll_interval: float = 0.5


def org_of(config_url: str) -> str:
    """The org (or owner) of a github.com config URL."""
    parts = [p for p in config_url.split("://", 1)[-1].split("/")[1:] if p]
    return parts[0] if parts else "example-org"


async def _json(response: aiohttp.ClientResponse) -> Any:
    if response.status >= 400:
        text = (await response.text())[:200]
        raise RemoteDemoError(f"{response.method} {response.url.path}: {response.status} {text}")
    return await response.json(content_type=None)


async def run_remote_demo(
    kube: KubeClient, options: RemoteDemoOptions, say: Callable[[str], None]
) -> dict[str, Any]:
    """Returns ``{"scale_sets": {variant: id}, "jobs": {"total": N, "completed": M}}``."""
    base = options.actions_url.rstrip("/")
    raw = demo.load_example_ars(options.example)
    org = options.org or org_of(str((raw.get("spec") or {}).get("githubConfigUrl") or ""))
    ars = demo.prepare_ars(raw, github_config_url=f"{base}/{org}")
    targets = demo.variant_targets(ars)
    deadline = time.monotonic() + options.timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.post(f"{base}/_sim/pats", json={}) as response:
            token = str((await _json(response))["token"])
        await _apply(kube, ars, token)
        meta = ars["metadata"]
        say(f"applied ARS {meta['namespace']}/{meta['name']} ({len(targets)} variants)")

        ids: dict[str, int] = {}
        while len(ids) < len(targets):
            async with http.get(f"{base}/_sim/snapshot") as response:
                snapshot = await _json(response)
            by_name = {s["name"]: int(s["id"]) for s in snapshot.get("scaleSets") or []}
            ids = {
                t.variant: by_name[t.scale_set_name] for t in targets if t.scale_set_name in by_name
            }
            _check(deadline, f"scale sets registered: {len(ids)}/{len(targets)}")
            await asyncio.sleep(options.poll_interval)
        say(
            "scale sets: " + ", ".join(f"{t.scale_set_name} (id {ids[t.variant]})" for t in targets)
        )

        job_ids: list[str] = []
        for job in demo.plan_demo_jobs(targets, options.jobs):
            body = {"labels": job.labels, "display_name": f"demo {job.variant}"}
            async with http.post(f"{base}/_sim/jobs", json=body) as response:
                job_ids.extend((await _json(response))["job_ids"])
        say(f"queued {len(job_ids)} demo jobs")

        done = -1
        while True:
            async with http.get(f"{base}/_sim/jobs") as response:
                listed = (await _json(response)).get("jobs") or []
            states = {str(j.get("jobId")): j for j in listed}
            finished = [states[i] for i in job_ids if states.get(i, {}).get("state") == "completed"]
            if len(finished) != done:
                done = len(finished)
                say(f"demo {done}/{len(job_ids)} done")
            if done == len(job_ids):
                break
            _check(deadline, f"demo {done}/{len(job_ids)} done")
            await asyncio.sleep(options.poll_interval)
    failed = [j for j in finished if j.get("result") not in (None, "succeeded")]
    say(
        f"demo complete: {done - len(failed)}/{len(job_ids)}"
        + (f", {len(failed)} failed" if failed else "")
    )
    return {
        "scale_sets": ids,
        "jobs": {"total": len(job_ids), "completed": done - len(failed), "failed": len(failed)},
    }


def _check(deadline: float, where: str) -> None:
    if time.monotonic() > deadline:
        raise RemoteDemoError(f"timed out at {where}")


async def _apply(kube: KubeClient, ars: dict[str, Any], token: str) -> None:
    """Namespace, credentials Secret (replaced: the simulator may be new) and the ARS."""
    namespace = str(ars["metadata"]["namespace"])
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": str(ars["spec"]["githubConfigSecret"]), "namespace": namespace},
        "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
    }
    with contextlib.suppress(ConflictError):
        await kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    try:
        await kube.create(secret)
    except ConflictError:
        await kube.replace(secret)
    with contextlib.suppress(ConflictError):  # from an earlier run: its scale sets are reused
        await kube.create(ars)


__all__ = ["RemoteDemoError", "RemoteDemoOptions", "org_of", "run_remote_demo"]
