"""The registrar's scale set records in the ``arcflow_scalesets`` KV bucket: keys and values.

A :class:`ScaleSetRecord` is the value stored under ``<ns>.<ars>.<variant>``. The registrar
writes it; the reconciler reads it to learn each variant's scale set id. Both must agree on the
key encoding and the JSON, so both live here (services may not import each other).

A record holds ids and names only, plus the *name* of the credentials Secret and the config
URL so a scale set can still be deleted after its ARS object is gone. It never holds a
credential.

Key encoding differs from subject tokens (:mod:`arcflow.common.subjects` writes ``.`` as
``~``): NATS KV keys do not allow ``~``, so a ``.`` in a name is written ``=`` here.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from arcflow.common.constants import DEFAULT_RUNNER_GROUP_ID
from arcflow.common.events import utc_now

#: Token of the default variant ``""`` in a key (``_`` never appears in a Kubernetes name).
DEFAULT_VARIANT_KEY: Final = "_"
#: ``.`` in an ARS name (a DNS subdomain may hold dots) becomes ``=``, which no Kubernetes name
#: holds, so keys stay three dot-separated tokens and prefix listing per ARS works.
DOT_IN_KEY: Final = "="
_KEY_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")


class InvalidRecordKeyError(ValueError):
    """A namespace, ARS or variant name that cannot be placed in a KV key."""


def _encode(value: str, what: str) -> str:
    if not _KEY_TOKEN_RE.fullmatch(value):
        raise InvalidRecordKeyError(f"{what} {value!r} is not a Kubernetes name")
    return value.replace(".", DOT_IN_KEY)


def _decode(token: str) -> str:
    return token.replace(DOT_IN_KEY, ".")


def record_key(namespace: str, ars: str, variant: str = "") -> str:
    """KV key ``<ns>.<ars>.<variant>`` (``_`` for the default variant, ``.`` as ``=``)."""
    variant_token = DEFAULT_VARIANT_KEY if variant == "" else _encode(variant, "variant")
    return f"{_encode(namespace, 'namespace')}.{_encode(ars, 'ARS')}.{variant_token}"


def ars_key_filter(namespace: str, ars: str) -> str:
    """KV key filter selecting every variant of one ARS."""
    return f"{_encode(namespace, 'namespace')}.{_encode(ars, 'ARS')}.*"


def parse_record_key(key: str) -> tuple[str, str, str]:
    """Inverse of :func:`record_key`: ``(namespace, ars, variant)``."""
    parts = key.split(".")
    if len(parts) != 3 or not all(parts):
        raise InvalidRecordKeyError(f"{key!r} is not a <ns>.<ars>.<variant> key")
    namespace, ars, variant = parts
    return (
        _decode(namespace),
        _decode(ars),
        "" if variant == DEFAULT_VARIANT_KEY else _decode(variant),
    )


class ScaleSetRecord(BaseModel):
    """The registration of one variant: ids, names and how to reach the service again."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    namespace: str
    ars: str
    variant: str = ""
    scale_set_id: int = Field(gt=0)
    scale_set_name: str
    runner_group_id: int = DEFAULT_RUNNER_GROUP_ID
    runner_group_name: str = ""
    labels: list[str] = Field(default_factory=list)
    github_config_url: str
    github_config_secret: str = Field(description="Secret *name*; never its data")
    ars_uid: str = ""
    announced: bool = Field(
        default=False,
        description="True once the scaleset.assigned event for this state was published",
    )
    updated_at: datetime = Field(default_factory=utc_now)

    @property
    def key(self) -> str:
        return record_key(self.namespace, self.ars, self.variant)

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> ScaleSetRecord:
        return cls.model_validate_json(data)


__all__ = [
    "DEFAULT_VARIANT_KEY",
    "DOT_IN_KEY",
    "InvalidRecordKeyError",
    "ScaleSetRecord",
    "ars_key_filter",
    "parse_record_key",
    "record_key",
]
