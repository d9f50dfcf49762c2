"""Credentials for the token chain: a PAT or a GitHub App (docs/upstream-behaviour.md#actions-auth).

Values are held as ``SecretStr`` and validated here, once, with errors that name the offending
key but never repeat its value. The App JWT and the admin-token expiry reading are pure functions
with an injectable clock.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from arcflow.common.actions.errors import CredentialsError

if TYPE_CHECKING:
    # PyJWT and cryptography (~10 MB) are imported only where an App key or a JWT is used.
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

KEY_TOKEN = "github_token"
KEY_APP_ID = "github_app_id"
KEY_INSTALLATION_ID = "github_app_installation_id"
KEY_PRIVATE_KEY = "github_app_private_key"
APP_KEYS = (KEY_APP_ID, KEY_INSTALLATION_ID, KEY_PRIVATE_KEY)

JWT_BACKDATE = timedelta(seconds=60)
JWT_LIFETIME = timedelta(minutes=9)


def _secret(value: str | SecretStr) -> SecretStr:
    return value if isinstance(value, SecretStr) else SecretStr(value)


class PatCredentials:
    """A personal access token; sent only to the registration-token endpoint."""

    __slots__ = ("token",)

    def __init__(self, token: str | SecretStr) -> None:
        secret = _secret(token)
        if not secret.get_secret_value().strip():
            raise CredentialsError(f"{KEY_TOKEN} is empty")
        self.token: SecretStr = secret

    def __repr__(self) -> str:
        return "PatCredentials(token=SecretStr('**********'))"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PatCredentials) and self.token == other.token

    def __hash__(self) -> int:
        return hash(("pat", self.token.get_secret_value()))


class AppCredentials:
    """A GitHub App installation. ``app_id`` is the numeric App ID or the App's client ID."""

    __slots__ = ("_key", "app_id", "installation_id", "private_key")

    def __init__(self, app_id: str | int, installation_id: int, private_key: str | SecretStr):
        app_id_text = str(app_id).strip()
        if not app_id_text:
            raise CredentialsError(f"{KEY_APP_ID} is empty")
        if isinstance(installation_id, bool) or not isinstance(installation_id, int):
            raise CredentialsError(f"{KEY_INSTALLATION_ID} must be an integer")
        if installation_id <= 0:
            raise CredentialsError(f"{KEY_INSTALLATION_ID} must be a positive integer")
        secret = _secret(private_key)
        self.app_id: str = app_id_text
        self.installation_id: int = installation_id
        self.private_key: SecretStr = secret
        self._key: RSAPrivateKey = load_rsa_private_key(secret)

    @property
    def signing_key(self) -> RSAPrivateKey:
        return self._key

    def __repr__(self) -> str:
        return (
            f"AppCredentials(app_id={self.app_id!r}, installation_id={self.installation_id}, "
            "private_key=SecretStr('**********'))"
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AppCredentials)
            and self.app_id == other.app_id
            and self.installation_id == other.installation_id
            and self.private_key == other.private_key
        )

    def __hash__(self) -> int:
        return hash(("app", self.app_id, self.installation_id))


Credentials = PatCredentials | AppCredentials


def load_rsa_private_key(private_key: SecretStr) -> RSAPrivateKey:
    """Load a PKCS#1 or PKCS#8 RSA PEM; the error says what is wrong, not what the key is."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    text = private_key.get_secret_value().strip()
    if not text:
        raise CredentialsError(f"{KEY_PRIVATE_KEY} is empty")
    if "\\n" in text and "\n" not in text:
        # A PEM pasted into a single-line field with literal "\n" separators.
        text = text.replace("\\n", "\n")
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError):
        raise CredentialsError(
            f"{KEY_PRIVATE_KEY} is not an unencrypted RSA private key in PEM format "
            "(PKCS#1 or PKCS#8)"
        ) from None
    except Exception:  # cryptography raises UnsupportedAlgorithm for some inputs
        raise CredentialsError(f"{KEY_PRIVATE_KEY} could not be loaded") from None
    if not isinstance(key, RSAPrivateKey):
        raise CredentialsError(f"{KEY_PRIVATE_KEY} is not an RSA key (RS256 needs RSA)")
    return key


def _text(data: Mapping[str, str | bytes], key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise CredentialsError(f"{key} is not valid UTF-8") from None
    if not isinstance(value, str):
        raise CredentialsError(f"{key} must be a string")
    return value.strip()


def credentials_from_secret_data(data: Mapping[str, str | bytes]) -> Credentials:
    """Build credentials from a decoded Kubernetes Secret's data (the upstream key names).

    Exactly one kind must be present: ``github_token``, or all of ``github_app_id``,
    ``github_app_installation_id`` and ``github_app_private_key``. Values must already be
    base64-decoded (``bytes`` are read as UTF-8).
    """
    if not isinstance(data, Mapping):
        raise CredentialsError("secret data must be a mapping of key to value")
    token = _text(data, KEY_TOKEN)
    present_app_keys = [k for k in APP_KEYS if _text(data, k)]
    if token and present_app_keys:
        raise CredentialsError(
            f"both {KEY_TOKEN} and GitHub App keys ({', '.join(present_app_keys)}) are set; "
            "provide only one kind of credentials"
        )
    if token:
        return PatCredentials(token)
    if not present_app_keys:
        raise CredentialsError(
            f"no credentials: set {KEY_TOKEN}, or {KEY_APP_ID}, {KEY_INSTALLATION_ID} "
            f"and {KEY_PRIVATE_KEY}"
        )
    missing = [k for k in APP_KEYS if k not in present_app_keys]
    if missing:
        raise CredentialsError(
            f"GitHub App credentials are incomplete: missing {', '.join(missing)}"
        )
    installation_text = _text(data, KEY_INSTALLATION_ID)
    try:
        installation_id = int(installation_text, 10)
    except ValueError:
        raise CredentialsError(f"{KEY_INSTALLATION_ID} must be an integer") from None
    return AppCredentials(
        app_id=_text(data, KEY_APP_ID),
        installation_id=installation_id,
        private_key=SecretStr(_text(data, KEY_PRIVATE_KEY)),
    )


def create_app_jwt(credentials: AppCredentials, *, now: datetime | None = None) -> str:
    """The RS256 App JWT: ``iat`` backdated 60 s against clock skew, ``exp`` 9 min later."""
    import jwt

    issued = (now or datetime.now(UTC)) - JWT_BACKDATE
    claims: dict[str, Any] = {
        "iat": int(issued.timestamp()),
        "exp": int((issued + JWT_LIFETIME).timestamp()),
        "iss": credentials.app_id,
    }
    return jwt.encode(claims, credentials.signing_key, algorithm="RS256")


def read_jwt_expiry(token: str) -> datetime:
    """The ``exp`` of a JWT, read without checking the signature (we cannot; the service signs).

    Raises ``ValueError`` with a reason (never the token) when it is not a JWT or has no ``exp``.
    Decoded by hand (base64url JSON header and claims): a process with a PAT then never loads
    PyJWT and cryptography just to read a token's expiry.
    """
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError("DecodeError")
        header, claims = (
            json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
            for part in parts[:2]
        )
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ValueError("DecodeError")
    except (ValueError, UnicodeDecodeError) as exc:
        reason = str(exc) if str(exc) == "DecodeError" else type(exc).__name__
        raise ValueError(f"token is not a decodable JWT ({reason})") from None
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise ValueError("token has no numeric exp claim")
    return datetime.fromtimestamp(exp, UTC)
