"""GitHub credentials from an ARS's ``githubConfigSecret``, and Actions clients cached per secret.

Clients are cached per (credentials fingerprint, config URL): the admin token chain costs up
to three GitHub calls, so a client lives as long as its credentials do. The fingerprint is a
SHA-256 over the credential keys and values; only the digest is kept, compared, or shown.
When a Secret is rotated its fingerprint changes, so the next call builds a new client and
the old one is closed once it falls out of the cache.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

from arcflow.common.actions.auth import (
    APP_KEYS,
    KEY_TOKEN,
    AppCredentials,
    PatCredentials,
    credentials_from_secret_data,
)
from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.errors import CredentialsError
from arcflow.common.kube import SECRET, KubeClient, NotFoundError

CREDENTIAL_KEYS: Final = (KEY_TOKEN, *APP_KEYS)

Credentials = PatCredentials | AppCredentials
#: ``(config URL, credentials, server connection) -> client``.
ClientFactory = Callable[[str, Credentials, ServerConnection], ActionsClient]


class CredentialsUnavailableError(Exception):
    """The credentials Secret is missing, unreadable or malformed. The text names the Secret
    and the offending keys, never a value."""


def credentials_fingerprint(data: Mapping[str, bytes]) -> str:
    """SHA-256 over the credential keys and values (sorted), hex; safe to log and compare."""
    digest = hashlib.sha256()
    for key in sorted(k for k in data if k in CREDENTIAL_KEYS):
        digest.update(key.encode())
        digest.update(b"\0")
        digest.update(data[key])
        digest.update(b"\0")
    return digest.hexdigest()


def decode_secret_data(secret: Mapping[str, object], where: str) -> dict[str, bytes]:
    """The base64-decoded ``data`` of a Secret manifest (plus ``stringData`` if present)."""
    decoded: dict[str, bytes] = {}
    data = secret.get("data") or {}
    if not isinstance(data, Mapping):
        raise CredentialsUnavailableError(f"secret {where} has a malformed data field")
    for key, value in data.items():
        if not isinstance(value, str):
            raise CredentialsUnavailableError(f"secret {where} key {key} is not a string")
        try:
            decoded[str(key)] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise CredentialsUnavailableError(
                f"secret {where} key {key} is not valid base64"
            ) from None
    string_data = secret.get("stringData") or {}
    if isinstance(string_data, Mapping):
        for key, value in string_data.items():
            if isinstance(value, str):
                decoded.setdefault(str(key), value.encode())
    return decoded


async def read_secret_data(kube: KubeClient, namespace: str, name: str) -> dict[str, bytes]:
    """Read and decode the credentials Secret through the Kubernetes layer."""
    where = f"{namespace}/{name}"
    if not name:
        raise CredentialsUnavailableError("spec.githubConfigSecret is empty")
    try:
        secret = await kube.get(SECRET, name, namespace)
    except NotFoundError:
        raise CredentialsUnavailableError(f"secret {where} not found") from None
    return decode_secret_data(secret, where)


def parse_credentials(data: Mapping[str, bytes], where: str) -> Credentials:
    try:
        return credentials_from_secret_data(data)
    except CredentialsError as exc:
        # CredentialsError texts name keys, never values.
        raise CredentialsUnavailableError(f"secret {where}: {exc}") from None


class ActionsClientCache:
    """An LRU of Actions clients keyed by (credentials fingerprint, config URL, connection
    fingerprint): a changed CA or proxy gets a new client, as rotated credentials do."""

    def __init__(self, factory: ClientFactory, *, max_size: int = 64) -> None:
        self._factory = factory
        self._max_size = max_size
        self._clients: OrderedDict[tuple[str, str, str], ActionsClient] = OrderedDict()
        self.created = 0

    def __len__(self) -> int:
        return len(self._clients)

    async def client_for(
        self,
        config_url: str,
        secret_data: Mapping[str, bytes],
        where: str,
        connection: ServerConnection | None = None,
    ) -> ActionsClient:
        connection = connection or ServerConnection()
        key = (
            credentials_fingerprint(secret_data),
            config_url.rstrip("/"),
            connection.fingerprint(),
        )
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client
        credentials = parse_credentials(secret_data, where)
        client = self._factory(config_url, credentials, connection)
        self.created += 1
        self._clients[key] = client
        while len(self._clients) > self._max_size:
            _, evicted = self._clients.popitem(last=False)
            await evicted.aclose()
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.aclose()
