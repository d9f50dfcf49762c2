"""``arcflow plan`` and ``arcflow validate`` agree with what the reconciler really does.

The reconciler runs for real (real nats-server, the Kubernetes API emulator over HTTP, a stand-in
for the registrar's KV records and RPC, as in the reconciler's own integration harness) on
``examples/02-runner-variants.yaml`` with known scale set ids; every object it wrote must equal
what ``arcflow plan`` prints for the same ids, apart from what the API server sets.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli
from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.constants import (
    ANNOTATION_INTEGRITY_HASH,
    ANNOTATION_RUNNER_GROUP_NAME,
    LISTENER_CONFIG_KEY,
)
from arcflow.common.kube import KubeClient
from arcflow.common.listener_config import GitHubCredentials
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.nats import ensure_jetstream
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer
from services.reconciler.tests.reconciler_integration.harness import (
    SECRET_NAME,
    TOKEN,
    FakeRegistrarRpc,
    Stack,
    reconciler_runtime,
    reconciler_test_settings,
)
from tests.manifests import assert_written, pat_secret
from tests.polling import eventually

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "02-runner-variants.yaml"
IDS = {"cpu-small": 101, "cpu-large": 102, "gpu": 103}
LISTENER_IMAGE = "ghcr.io/arcflow/listener:consistency"
SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
REDACTED = "<redacted>"
# The listener NATS wiring both sides are given (the Secret is only referenced, never read).
LISTENER_NATS_URL = "nats://nats.arc-systems.svc:4222"
LISTENER_NATS_SECRET = "arcflow-listener-nats"


@asynccontextmanager
async def reconciler_stack(
    nats_url: str, kube: KubeClient, namespace: str, controller_namespace: str
) -> AsyncIterator[Stack]:
    """The harness's stack, with the settings ``arcflow plan`` can express (no pull secrets)."""
    settings = reconciler_test_settings().model_copy(
        update={
            "controller_namespace": controller_namespace,
            "namespaces": [namespace],  # the session's API server is shared
            "listener_image": LISTENER_IMAGE,
            "listener_image_pull_secrets": [],
            "listener_nats_url": LISTENER_NATS_URL,
            "listener_nats_secret": LISTENER_NATS_SECRET,
        }
    )
    nc = await nats.connect(nats_url)
    await ensure_jetstream(nc.jetstream())
    await kube.create(pat_secret(SECRET_NAME, namespace, TOKEN))
    rpc = FakeRegistrarRpc(nc)
    await rpc.start()
    runtime = reconciler_runtime(nats_url, kube, settings)
    await runtime.start()
    try:
        yield Stack(nc, kube, namespace, runtime.state, rpc, [], controller_namespace)
    finally:
        await runtime.stop()
        await nc.drain()


@pytest.fixture
async def stack(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
) -> AsyncIterator[Stack]:
    async with reconciler_stack(
        private_nats_server.url, kube_client, kube_namespace, controller_namespace
    ) as built:
        yield built


def _example_in(namespace: str, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["githubConfigSecret"] = SECRET_NAME
    path = tmp_path / "ars.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return doc, path


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """Without what the API server sets (and status, which only the server/controllers own)."""
    obj = json.loads(json.dumps(obj))
    obj.pop("status", None)
    for key in SERVER_SET:
        obj["metadata"].pop(key, None)
    for ref in obj["metadata"].get("ownerReferences") or []:
        ref.pop("uid", None)
    return obj


def _config_with_token_redacted(live_secret: dict[str, Any]) -> dict[str, Any]:
    config = json.loads(base64.b64decode(live_secret["data"][LISTENER_CONFIG_KEY]))
    assert config["github_token"] == TOKEN  # the reconciler really read the credentials
    config["github_token"] = REDACTED
    return config


def _without_hash(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].get("annotations", {}).pop(ANNOTATION_INTEGRITY_HASH, None)
    return obj


def _without_group_name(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copied: list[dict[str, Any]] = json.loads(json.dumps(objects))
    for obj in copied:
        for place in (obj["metadata"], obj.get("spec", {}).get("ephemeralRunnerSpec", {})):
            (place.get("annotations") or {}).pop(ANNOTATION_RUNNER_GROUP_NAME, None)
    return copied


def _plan(path: Path, controller_namespace: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        cli,
        [
            "plan",
            str(path),
            "--ids",
            ",".join(f"{k}={v}" for k, v in IDS.items()),
            "--controller-namespace",
            controller_namespace,
            "--listener-image",
            LISTENER_IMAGE,
            "--listener-nats-url",
            LISTENER_NATS_URL,
            "--listener-nats-secret",
            LISTENER_NATS_SECRET,
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    planned: list[dict[str, Any]] = json.loads(result.stdout)
    return planned


def _validate(path: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.stdout.splitlines()


async def test_reconciler_writes_exactly_what_plan_prints(stack: Stack, tmp_path: Path) -> None:
    doc, path = _example_in(stack.namespace, tmp_path)
    assert _validate(path) == (0, ["valid"])
    for variant, scale_set_id in IDS.items():
        await stack.register("arc-runners", variant, scale_set_id)
    await stack.apply_ars(doc)

    async def converged() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "arc-runners", stack.namespace)
        pods = await stack.list("Pod", stack.controller_namespace)
        return (ars.get("status") or {}).get("phase") == "Running" and len(pods) == 1

    await eventually(converged, within=20)
    await stack.app.queue.wait_idle()

    # The runner group name GitHub resolved reaches the children through the ARS annotation
    # the reconciler writes; plan the ARS as it is now (as `kubectl get -o yaml` exports it).
    live_ars = _comparable(
        await stack.kube.get("AutoscalingRunnerSet", "arc-runners", stack.namespace)
    )
    live_path = tmp_path / "live-ars.yaml"
    live_path.write_text(yaml.safe_dump(live_ars, sort_keys=False))
    planned = _plan(live_path, stack.controller_namespace)
    # Planned from the file the user wrote, the only difference is that resolved group name.
    from_file = _plan(path, stack.controller_namespace)
    assert _without_group_name(from_file) == _without_group_name(planned)
    kinds = sorted(o["kind"] for o in planned)
    assert kinds == sorted(
        [
            *(["EphemeralRunnerSet"] * 3),
            "AutoscalingListener",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Secret",
            "Pod",
        ]
    )
    # The config Secret's and the listener Pod's integrity hashes cover the token, which plan
    # never sees: those two hashes must equal the builders' with the real credentials.
    with_token = plan_objects(
        AutoscalingRunnerSet.from_manifest(live_ars),
        IDS,
        BuildSettings(
            stack.controller_namespace,
            LISTENER_IMAGE,
            listener_nats_url=LISTENER_NATS_URL,
            listener_nats_secret=LISTENER_NATS_SECRET,
        ),
        GitHubCredentials.model_validate({"github_token": TOKEN}),
    )
    token_hashes = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH]
        for o in with_token
        if o["kind"] in ("Secret", "Pod")
    }
    for want in planned:
        meta = want["metadata"]
        live = await stack.kube.get(want["kind"], meta["name"], meta["namespace"])
        if (want["kind"], meta["name"]) in token_hashes:
            live_hash = live["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH]
            assert live_hash == token_hashes[(want["kind"], meta["name"])]
            live = _without_hash(live)
            want = _without_hash(json.loads(json.dumps(want)))
        if want["kind"] == "Pod":
            env = {e["name"]: e for e in live["spec"]["containers"][0]["env"]}
            assert env["ARCFLOW_NATS_URL"]["value"] == LISTENER_NATS_URL
            assert env["ARCFLOW_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": LISTENER_NATS_SECRET,
                "key": "password",
            }
        if want["kind"] == "Secret":
            shown = json.loads(want["stringData"][LISTENER_CONFIG_KEY])
            assert _config_with_token_redacted(live) == shown
            live_rest = {k: v for k, v in _comparable(live).items() if k != "data"}
            want_rest = {k: v for k, v in _comparable(want).items() if k != "stringData"}
            assert_written(live_rest, want_rest, f"Secret {meta['name']}")
            continue
        assert_written(_comparable(live), _comparable(want), f"{want['kind']} {meta['name']}")

    # Nothing the plan does not mention was written (besides runners, which scale at runtime).
    for kind, namespace in (
        ("EphemeralRunnerSet", stack.namespace),
        ("AutoscalingListener", stack.controller_namespace),
        ("Pod", stack.controller_namespace),
        ("Secret", stack.controller_namespace),
        ("Role", stack.namespace),
        ("RoleBinding", stack.namespace),
    ):
        live_names = {o["metadata"]["name"] for o in await stack.list(kind, namespace)}
        planned_names = {
            o["metadata"]["name"]
            for o in planned
            if o["kind"] == kind and o["metadata"]["namespace"] == namespace
        }
        assert live_names == planned_names, kind


async def test_validate_rejects_exactly_what_the_reconciler_refuses(
    kube_emulator: KubeEmulator, stack: Stack, tmp_path: Path
) -> None:
    """On the emulator: a real server's CRD schema refuses this ARS before the reconciler sees
    it; the emulator stores it, as a server would keep an object stored under a laxer CRD, so
    the reconciler's own refusal can be compared with ``arcflow validate``."""
    doc, path = _example_in(stack.namespace, tmp_path)
    doc["metadata"]["name"] = "arc-bad"
    doc["spec"]["runnerVariants"][0]["name"] = "Not_A_Label"
    doc["spec"]["runnerVariants"][1]["minRunners"] = 9
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, lines = _validate(path)
    assert code == 1
    assert len(lines) >= 2
    assert any(line.startswith("spec.runnerVariants[0].name: ") for line in lines)
    assert any(line.startswith("spec.runnerVariants[1].") for line in lines)

    await stack.apply_ars(doc)

    async def condition() -> dict[str, Any] | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "arc-bad", stack.namespace)
        conditions = (ars.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "SpecValid"), None)

    found = await eventually(condition, within=20)
    assert found["status"] == "False"
    assert found["message"] == "; ".join(lines)
    events = [
        e
        for e in await stack.list("Event")
        if e["involvedObject"]["name"] == "arc-bad" and e["reason"] == "InvalidSpec"
    ]
    assert len(events) == 1
    assert events[0]["message"].endswith("; ".join(lines))
    await stack.app.queue.wait_idle()
    assert await stack.list("EphemeralRunnerSet") == []
    assert await stack.list("AutoscalingListener", stack.controller_namespace) == []
