"""Secret redaction for anything that may reach a log line, a dead letter or an error text.

Two complementary rules, both pure:

* **by key**: the value of a mapping key (or of ``key=value`` / ``"key": "value"`` in text)
  whose name looks secret (password, token, secret, private key, JIT config, authorization,
  credentials, api key) is replaced by :data:`MASK`;
* **by shape**: GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
  ``github_pat_``), JWT-like strings (``eyJ...``), bearer credentials and PEM private-key
  blocks are masked wherever they appear.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

MASK: Final = "***"

_SECRET_KEY_WORDS: Final = (
    r"password|passwd|secret|token|private[_-]?key|jit[_-]?config|authorization|"
    r"credentials?|api[_-]?key|creds|cookie"
)
SECRET_KEY_RE: Final = re.compile(rf"(?i)({_SECRET_KEY_WORDS})")

_TOKEN_PATTERNS: Final = (
    re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        re.DOTALL,
    ),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{10,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{10,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?"),
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"),
)

# key=value, key: value, "key": "value", 'key': 'value' (quoted or bare values). A key starts
# where a run of name characters starts: tried from every position inside a long run (a dead
# letter of 8 KiB of digits), the pattern backtracked quadratically, seconds per message.
_KEYED_VALUE_RE: Final = re.compile(
    rf"""(?ix)
    (?P<key>(?<![\w.-])["']?[\w.-]*(?:{_SECRET_KEY_WORDS})[\w.-]*["']?\s*[:=]\s*)
    (?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;}}\]"']+)
    """
)


def _mask_keyed(match: re.Match[str]) -> str:
    value = match.group("value")
    if value[:1] in {'"', "'"}:
        return f"{match.group('key')}{value[0]}{MASK}{value[0]}"
    return f"{match.group('key')}{MASK}"


def _mask_token(match: re.Match[str]) -> str:
    text = match.group(0)
    lowered = text.lower()
    for scheme in ("bearer", "basic", "token"):
        if lowered.startswith(scheme):
            return f"{text[: len(scheme)]} {MASK}"
    return MASK


def redact_text(text: str) -> str:
    """Mask token-shaped strings and the values of secret-named keys inside free text."""
    for pattern in _TOKEN_PATTERNS:
        text = pattern.sub(_mask_token, text)
    return _KEYED_VALUE_RE.sub(_mask_keyed, text)


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a secret (its value must never be shown)."""
    return SECRET_KEY_RE.search(key) is not None


def redact_value(value: object) -> object:
    """Redact recursively: mappings by key and shape, sequences item-wise, strings by shape."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            str(k): MASK if is_secret_key(str(k)) else redact_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_value(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return redact_text(bytes(value).decode("utf-8", errors="replace"))
    return value
