"""Bad specs are explained where an operator looks (issue 12 item 4): a template-less ARS and
an ARS whose GitHub Secret is missing each get a False condition and a Warning Event, and the
template-less one gets no child object."""

from __future__ import annotations

from typing import Any

import pytest

from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration


async def _condition(stack: Stack, name: str, kind: str) -> dict[str, Any] | None:
    ars = await stack.kube.get("AutoscalingRunnerSet", name, stack.namespace)
    conditions = (ars.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


async def test_template_less_ars_is_invalid_and_creates_nothing(stack: Stack) -> None:
    doc = ars_manifest(stack.namespace, "bare")
    del doc["spec"]["template"]
    await stack.register("bare", "", 7)  # even with an id, nothing may be built
    await stack.apply_ars(doc)

    async def invalid() -> dict[str, Any] | None:
        found = await _condition(stack, "bare", "SpecValid")
        return found if found and found["status"] == "False" else None

    condition = await eventually(invalid)
    assert "spec.template" in condition["message"]
    assert await eventually(lambda: stack.events("InvalidSpec", "bare"))
    await stack.wait_idle()
    assert await stack.list("EphemeralRunnerSet") == []
    assert await stack.list("AutoscalingListener", stack.controller_namespace) == []


async def test_missing_github_secret_gets_a_condition_and_an_event(stack: Stack) -> None:
    await stack.apply_ars(ars_manifest(stack.namespace, "nocreds", githubConfigSecret="absent"))

    async def missing() -> dict[str, Any] | None:
        found = await _condition(stack, "nocreds", "GitHubCredentialsFound")
        return found if found and found["status"] == "False" else None

    condition = await eventually(missing)
    assert condition["reason"] == "GitHubSecretNotFound"
    assert "absent" in condition["message"]
    warnings = await eventually(lambda: stack.events("GitHubSecretNotFound", "nocreds"))
    assert warnings[0]["type"] == "Warning"

    # The Secret appears: the condition turns True on the next look (every 5 s while the
    # scale set ids are missing), with a Normal Event.
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "absent", "namespace": stack.namespace},
            "data": {"github_token": "Z2hwX3g="},
        }
    )

    async def found() -> bool:
        current = await _condition(stack, "nocreds", "GitHubCredentialsFound")
        return bool(current and current["status"] == "True")

    await eventually(found, within=15)
    assert await stack.events("GitHubSecretFound", "nocreds")
    assert len(await stack.events("GitHubSecretNotFound", "nocreds")) == 1
