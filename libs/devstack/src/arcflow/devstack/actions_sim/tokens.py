"""Credentials of the simulated GitHub: PATs, Apps, installation and registration tokens, JWTs.

Each token kind is accepted only where GitHub accepts it
(docs/upstream-behaviour.md#actions-simulator). Service JWTs are HS256
with a per-simulator secret and always carry ``exp``, because clients schedule refreshes from it.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

REGISTRATION_TOKEN_TTL = 3600.0
INSTALLATION_TOKEN_TTL = 3600.0
APP_JWT_MAX_LIFETIME = 600 + 60
"""GitHub refuses App JWTs valid for more than ten minutes; one minute of clock drift allowed."""


@dataclass(frozen=True)
class GitHubAppCredentials:
    """What a user copies from the App settings page; the key never appears in a repr."""

    app_id: int
    client_id: str
    installation_id: int
    private_key: str = field(repr=False)


@dataclass
class _App:
    app_id: int
    client_id: str
    installation_ids: set[int]
    public_key_pem: bytes


@dataclass
class _Expiring:
    expires_at: float
    scope: str = ""
    kind: str = ""


class TokenAuthority:
    """Issues and checks every credential; it never logs or reprs a secret."""

    def __init__(self, admin_token_ttl: float, mq_token_ttl: float) -> None:
        self._secret = secrets.token_bytes(32)
        self.admin_token_ttl = admin_token_ttl
        self.mq_token_ttl = mq_token_ttl
        self._pats: set[str] = set()
        self._apps: dict[int, _App] = {}
        self._installation_tokens: dict[str, _Expiring] = {}
        self._registration_tokens: dict[str, _Expiring] = {}
        self._next_app_id = 1001
        self._next_installation_id = 5001

    def __repr__(self) -> str:
        return f"TokenAuthority(pats={len(self._pats)}, apps={len(self._apps)})"

    # --- PATs and Apps -------------------------------------------------------------------
    def add_pat(self, token: str | None = None) -> str:
        value = token or "ghp_sim" + secrets.token_hex(18)
        self._pats.add(value)
        return value

    def add_app(self) -> GitHubAppCredentials:
        """Register an App with one installation; the simulator generates its RSA key."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        app_id, installation_id = self._next_app_id, self._next_installation_id
        self._next_app_id += 1
        self._next_installation_id += 1
        client_id = f"Iv1.sim{app_id:08x}"
        self._apps[app_id] = _App(app_id, client_id, {installation_id}, public)
        return GitHubAppCredentials(app_id, client_id, installation_id, pem)

    def verify_app_jwt(self, token: str, installation_id: int) -> str | None:
        """Return ``None`` if the App JWT may mint a token for the installation, else why not."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return "A JSON web token could not be decoded"
        issuer = str(unverified.get("iss", ""))
        app = next((a for a in self._apps.values() if issuer in (str(a.app_id), a.client_id)), None)
        if app is None:
            return "Integration not found"
        try:
            claims = jwt.decode(
                token,
                app.public_key_pem,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"]},
                leeway=60,
            )
        except jwt.ExpiredSignatureError:
            return "'Expiration time' claim ('exp') must be a numeric value in the future"
        except jwt.PyJWTError:
            return "A JSON web token could not be decoded"
        if int(claims["exp"]) - int(claims["iat"]) > APP_JWT_MAX_LIFETIME:
            return "'Expiration time' claim ('exp') is too far in the future"
        if installation_id not in app.installation_ids:
            return "Not Found"
        return None

    def issue_installation_token(self) -> tuple[str, float]:
        token = "ghs_sim" + secrets.token_hex(18)
        expires = time.time() + INSTALLATION_TOKEN_TTL
        self._installation_tokens[token] = _Expiring(expires)
        return token, expires

    def github_principal(self, token: str) -> str | None:
        """``"pat"`` or ``"installation"`` for a valid REST credential, else ``None``."""
        if token in self._pats:
            return "pat"
        entry = self._installation_tokens.get(token)
        if entry is not None and entry.expires_at > time.time():
            return "installation"
        return None

    def issue_registration_token(self, scope: str) -> tuple[str, float]:
        token = "AREG" + secrets.token_hex(16).upper()
        expires = time.time() + REGISTRATION_TOKEN_TTL
        self._registration_tokens[token] = _Expiring(expires, scope=scope)
        return token, expires

    def registration_token_valid(self, token: str) -> bool:
        entry = self._registration_tokens.get(token)
        return entry is not None and entry.expires_at > time.time()

    # --- service JWTs --------------------------------------------------------------------
    def _issue(self, kind: str, ttl: float, extra: dict[str, Any]) -> str:
        now = time.time()
        claims = {
            "kind": kind,
            "iat": int(now),
            "nbf": int(now) - 1,
            "exp": now + ttl,
            "jti": uuid.uuid4().hex,
            "iss": "arcflow-actions-sim",
            **extra,
        }
        return jwt.encode(claims, self._secret, algorithm="HS256")

    def issue_admin_token(self) -> str:
        return self._issue("admin", self.admin_token_ttl, {})

    def issue_mq_token(self, session_id: str, scale_set_id: int) -> str:
        return self._issue("mq", self.mq_token_ttl, {"sid": session_id, "ssid": scale_set_id})

    def issue_runner_token(self, runner_id: int) -> str:
        """What a runner gets for its JIT credentials: good for its own calls only."""
        return self._issue("runner", self.admin_token_ttl, {"rid": runner_id})

    def verify(self, token: str, kind: str) -> dict[str, Any] | None:
        """Claims of a valid, unexpired service JWT of ``kind``; ``None`` otherwise."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._secret,
                algorithms=["HS256"],
                # PyJWT truncates exp to whole seconds; sub-second TTLs are checked below.
                options={"require": ["exp", "kind"], "verify_iat": False, "verify_exp": False},
            )
        except jwt.PyJWTError:
            return None
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or expires <= time.time():
            return None
        return claims if claims.get("kind") == kind else None
