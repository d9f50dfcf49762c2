"""Both backends for every conformance test: the real control plane and the emulator.

Each test that uses ``kube_client`` / ``kube_namespace`` (or ``backend``) runs twice in the
same session, ``[apiserver]`` against the session's real kube-apiserver (``control_plane``
of ``tests/fixtures/kube.py``) and ``[emulator]`` against a fresh emulator, so a difference
of the emulator fails a test instead of hiding behind the backend a run happened to pick.

A test that needs a fault only the emulator can give requests ``kube_emulator`` and carries
``emulator_only`` (``tests/conformance/helpers.py``), which pins the parameter to
``emulator``; it says why in its docstring. ``ARCFLOW_TEST_KUBE=emulator`` skips the
``apiserver`` half (a machine without the binaries); ``ARCFLOW_TEST_KUBECONFIG`` points the
``apiserver`` half at a cluster of yours.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from arcflow.common.kube import NAMESPACE, KubeClient, KubeSettings, NotFoundError
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.fixtures.kube import APISERVER, BACKEND_ENV, EMULATOR, real_kubeconfig
from tests.fixtures.kube import backend as chosen_backend

BACKENDS = (APISERVER, EMULATOR)


@dataclass
class Backend:
    """One backend of one test: its client, its own namespace, and what is behind it."""

    name: str
    client: KubeClient
    namespace: str
    kubeconfig: Path
    emulator: KubeEmulator | None = None
    plane: ControlPlane | None = None

    @property
    def real(self) -> bool:
        return self.name == APISERVER

    async def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One request with a Content-Type of the test's choosing (what ``KubeClient`` never
        sends): ``(HTTP status, decoded body)``, errors included."""
        data = None if body is None else json.dumps(body).encode()
        if self.emulator is not None:
            async with aiohttp.ClientSession() as session:
                headers = {"Content-Type": content_type} if data is not None else {}
                async with session.request(
                    method, f"{self.emulator.url}{path}", data=data, headers=headers
                ) as response:
                    text = await response.text()
                    return response.status, json.loads(text) if text else None
        if self.plane is None:
            pytest.skip("raw requests need the session's own control plane")
        plane = self.plane
        url = f"{plane.url}{path}"

        def send() -> tuple[int, Any]:
            request = urllib.request.Request(url, data=data, method=method)
            if data is not None:
                request.add_header("Content-Type", content_type)
            context = ssl.create_default_context(cafile=str(plane.credentials.ca))
            context.load_cert_chain(plane.credentials.admin_cert, plane.credentials.admin_key)
            try:
                with urllib.request.urlopen(request, timeout=10, context=context) as response:
                    raw = response.read()
                    return response.status, json.loads(raw) if raw else None
            except urllib.error.HTTPError as error:
                raw = error.read()
                return error.code, json.loads(raw) if raw else None

        return await asyncio.to_thread(send)


async def _client(kubeconfig: Path) -> KubeClient:
    return await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000, request_timeout=10)
    )


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """This test's backend (``apiserver`` or ``emulator``) with a namespace of its own."""
    name = str(request.param)
    namespace = f"arcflow-test-{secrets.token_hex(4)}"
    if name == APISERVER:
        if not real_kubeconfig() and chosen_backend() == EMULATOR:
            pytest.skip(f"{BACKEND_ENV}={EMULATOR}: the real server half is skipped")
        plane: ControlPlane | None = None
        if real_kubeconfig():
            kubeconfig = Path(str(real_kubeconfig()))
        else:
            plane = request.getfixturevalue("control_plane")
            kubeconfig = plane.kubeconfig
        async with await _client(kubeconfig) as client:
            await client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            try:
                yield Backend(name, client, namespace, kubeconfig, plane=plane)
            finally:
                # The namespace controller removes the contents, asynchronously.
                with contextlib.suppress(NotFoundError):
                    await client.delete(NAMESPACE, namespace)
        return
    async with contextlib.AsyncExitStack() as stack:
        if "kube_emulator" in request.fixturenames:
            emulator: KubeEmulator = request.getfixturevalue("kube_emulator")
        else:
            emulator = await stack.enter_async_context(KubeEmulator(history_limit=1000))
        kubeconfig = emulator.write_kubeconfig(tmp_path / "backend-kubeconfig")
        client = await stack.enter_async_context(await _client(kubeconfig))
        await client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        yield Backend(name, client, namespace, kubeconfig, emulator=emulator)


@pytest.fixture
def kube_client(backend: Backend) -> KubeClient:
    """This backend's client (overrides the session-wide one of ``tests/fixtures/kube.py``)."""
    return backend.client


@pytest.fixture
def kube_namespace(backend: Backend) -> str:
    return backend.namespace


@pytest.fixture
def on_real_server(backend: Backend) -> bool:
    return backend.real
