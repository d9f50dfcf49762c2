"""``StackFactory(identities=True)``: each service runs as the ServiceAccount its chart gives it
on the real server, the stack still serves an ARS (its listener opens a session), and the API
server's audit log names each service's own user, not the admin."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.devstack import demo
from arcflow.devstack.factory import StackFactory, StackStartError
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "02-runner-variants.yaml"


def _users(audit_log: Path) -> set[str]:
    users = set()
    for line in audit_log.read_text(errors="replace").splitlines():
        try:
            users.add(str(json.loads(line)["user"]["username"]))
        except (ValueError, KeyError):
            continue
    return users


async def test_each_service_is_its_own_service_account_and_an_ars_is_served() -> None:
    raw = demo.load_example_ars(EXAMPLE)
    namespace = str(raw["metadata"]["namespace"])
    factory = StackFactory(
        kube="apiserver",
        audit=True,
        identities=True,
        proxy=True,
        namespaces=[namespace],
        healthy_within=90,
        poll_timeout=1,
    )
    async with factory as parts:
        assert set(parts.identities) == {"watcher", "registrar", "reconciler"}
        assert parts.simulator is not None
        assert parts.control_plane is not None
        ars = demo.prepare_ars(raw, github_config_url=parts.simulator.config_url("example-org"))
        token = parts.simulator.add_pat()
        await parts.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": ars["spec"]["githubConfigSecret"], "namespace": namespace},
                "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
            }
        )
        await parts.kube.create(ars)
        names = {t.scale_set_name for t in demo.variant_targets(ars)}

        async def sessions_open() -> bool:
            sets = {s["name"]: s for s in parts.simulator.snapshot()["scaleSets"]}  # type: ignore[union-attr]
            return names <= set(sets) and all(sets[n].get("session") for n in names)

        await eventually(sessions_open, within=120, what="every variant's session open")
        for service in parts.services.values():
            assert service.healthy(), f"{service.name} is not healthy"
        users = _users(parts.control_plane.audit_log)
        for name, identity in parts.identities.items():
            assert identity.username.startswith("system:serviceaccount:arc-systems:")
            assert identity.username in users, f"the audit log never names the {name}"
        # the services' requests went through the proxy with their own token
        assert parts.proxy is not None
        assert parts.proxy.counts["reconciler"], "the reconciler made no request"


async def test_identities_need_a_control_plane_of_our_own() -> None:
    factory = StackFactory(kube="emulator", identities=True, simulator=False, pod_runner=False)
    with pytest.raises(StackStartError, match="identities=True"):
        async with factory:
            pass
