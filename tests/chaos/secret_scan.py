"""Every secret the stack handed out, and a scan of everywhere arcflow writes for them.

Recorded: the credential in the GitHub Secret (PAT, or the GitHub App's private key), and
every token and JIT config the Actions simulator issues while the test runs (installation,
registration, admin and message-queue tokens, encoded JIT configs), by wrapping the
simulator's issuing methods on the instance: what they return is unchanged.

Scanned: every message (payload and headers) of every JetStream stream, which includes the KV
buckets' streams; every log file of the services and listener processes; every Kubernetes
object but the data of Secrets (Events, statuses, annotations, specs); each service's
``/metrics``, ``/healthz`` and ``/readyz`` pages. A value counts as found raw or base64-encoded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import nats
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import ServiceUnavailableError

from arcflow.common.kube import ARC_RESOURCES, DEFAULT_RESOURCES, SECRET

if TYPE_CHECKING:
    from tests.chaos.harness import ChaosStack

#: Shorter values are not secrets worth scanning for (and would match by accident).
_MIN_LENGTH = 16


@dataclass
class SecretRecorder:
    """``kind -> values`` of every secret issued; :meth:`attach` wraps the simulator."""

    values: dict[str, set[str]] = field(default_factory=dict)

    def add(self, kind: str, value: str) -> None:
        if len(value) >= _MIN_LENGTH:
            self.values.setdefault(kind, set()).add(value)

    def attach(self, stack: ChaosStack) -> None:
        assert stack.sim is not None
        for kind, value in stack.credentials.items():
            self.add(kind, value)
            if "PRIVATE KEY" in value:  # each base64 line of the PEM body on its own too
                for line in value.splitlines():
                    if "-----" not in line:
                        self.add(kind + " (a line)", line.strip())
        tokens = stack.sim.tokens
        self._wrap(tokens, "issue_installation_token", "installation token", lambda r: r[0])
        self._wrap(tokens, "issue_registration_token", "registration token", lambda r: r[0])
        self._wrap(tokens, "issue_admin_token", "admin token", lambda r: r)
        self._wrap(tokens, "issue_mq_token", "message-queue token", lambda r: r)
        self._wrap(stack.sim.engine, "generate_jit_config", "JIT config", lambda r: r[1])

    def _wrap(self, owner: Any, method: str, kind: str, pick: Callable[[Any], str]) -> None:
        original = getattr(owner, method)

        def recording(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.add(kind, pick(result))
            return result

        setattr(owner, method, recording)

    def needles(self) -> list[tuple[str, bytes]]:
        found = []
        for kind, values in self.values.items():
            for value in values:
                found.append((kind, value.encode()))
                found.append((kind + " (base64)", base64.b64encode(value.encode())))
        return found

    def counts(self) -> dict[str, int]:
        return {kind: len(values) for kind, values in sorted(self.values.items())}


def _hits(needles: list[tuple[str, bytes]], where: str, data: bytes) -> list[str]:
    return [f"{kind} in {where}" for kind, needle in needles if needle in data]


async def _stream_messages(nats_url: str) -> Iterable[tuple[str, bytes]]:
    """(``stream/seq``, payload and headers) of every stored message of every stream."""
    found: list[tuple[str, bytes]] = []
    client = await nats.connect(servers=nats_url.split(","), inbox_prefix="_INBOX_chaosscan")
    try:
        js = client.jetstream(timeout=10)
        for info in await js.streams_info():
            name = info.config.name
            expected = info.state.messages
            if not expected:
                continue
            subject = (info.config.subjects or [">"])[0]
            no_acks = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
            sub = await js.pull_subscribe(subject, stream=name, config=no_acks)
            seen = 0
            unavailable = 0
            while seen < expected:
                try:
                    messages = await sub.fetch(500, timeout=2)
                except (NatsTimeoutError, TimeoutError):
                    break
                except ServiceUnavailableError:
                    # On a cluster a new consumer answers 503 until its leader is elected.
                    unavailable += 1
                    if unavailable > 20:
                        raise
                    await asyncio.sleep(0.25)
                    continue
                for msg in messages:
                    seen += 1
                    headers = json.dumps(msg.headers or {}).encode()
                    found.append((f"{name}/{msg.metadata.sequence.stream}", msg.data + headers))
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            assert seen >= expected, f"read {seen}/{expected} messages of {name}"
    finally:
        await client.close()
    return found


def _http(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        return bytes(exc.read())
    except (OSError, http.client.HTTPException):
        # Nothing there, or no HTTP server any more: the port of a listener that is gone
        # may since belong to any other process on a shared machine (one answered with a
        # nats-server INFO line).
        return b""


@dataclass
class ScanReport:
    found: list[str]
    scanned: dict[str, int]


async def scan(stack: ChaosStack, recorder: SecretRecorder) -> ScanReport:
    assert stack.kube is not None
    needles = recorder.needles()
    found: list[str] = []
    scanned: dict[str, int] = {}

    messages = list(await _stream_messages(stack.nats_url))
    scanned["stream messages"] = len(messages)
    for where, data in messages:
        found += _hits(needles, where, data)

    logs = stack.log_files()
    scanned["log files"] = len(logs)
    for path in logs:
        found += _hits(needles, f"log {path.name}", path.read_bytes())

    objects = 0
    canary: list[str] = []
    for resource in dict.fromkeys([*DEFAULT_RESOURCES, *ARC_RESOURCES]):
        if not resource.namespaced and resource.kind != "Namespace":
            continue
        for obj in (await stack.kube.list(resource)).items:
            objects += 1
            shown = {"metadata": obj.get("metadata")} if resource is SECRET else obj
            where = f"{resource.kind} {obj['metadata'].get('name')}"
            found += _hits(needles, where, json.dumps(shown).encode())
            if resource is SECRET and obj["metadata"].get("name") == stack.credentials_secret:
                canary = _hits(needles, where, json.dumps(obj).encode())
    scanned["Kubernetes objects"] = objects
    # Self-check: the scan must see the credential where it belongs, in its own Secret.
    if not canary:
        found.append("scan self-check: the credential was not found in its own Secret")

    pages = 0
    for service in stack.services.values():
        for port, path in (
            (service.metrics_port, "/metrics"),
            (service.health_port, "/healthz"),
            (service.health_port, "/readyz"),
        ):
            body = _http(f"http://127.0.0.1:{port}{path}")
            pages += 1
            found += _hits(needles, f"{service.name} {path}", body)
    for config in sorted((stack.work_dir / "pods").glob("*/config.json")):
        address = json.loads(config.read_text()).get("metrics_addr")
        if address:  # the listener's own page, at the address the pod runner gave it
            body = _http(f"http://{address}/metrics")
            pages += 1
            found += _hits(needles, f"listener /metrics ({config.parent.name})", body)
    scanned["metrics and health pages"] = pages
    return ScanReport(found=found, scanned=scanned)
