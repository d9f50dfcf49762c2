"""Shared building blocks for the CRD models: the base config, object metadata, ResourceMeta.

Every model parses strictly (a Kubernetes structural schema never coerces ``"5"`` into ``5``),
keeps fields it does not know (``extra="allow"``) so nothing a user wrote is lost, and
serialises only what was set, so an upstream manifest round-trips unchanged. The few fields
Go always serialises (no ``omitempty``) or never serialises when zero (``omitempty`` on an
``int``) are declared per class in ``_always_serialised`` / ``_omitted_when_zero``.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from arcflow.common.constants import API_VERSION

#: A pod template (or any embedded Kubernetes object) kept verbatim as a plain dict, so fields
#: arcflow does not model (new Kubernetes pod fields, vendor extensions) survive untouched.
PodTemplate = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]

#: A runner count. Negative values parse (so validation can name the field) but the CRD
#: schema rejects them with ``minimum: 0``.
RunnerCount = Annotated[int, WithJsonSchema({"type": "integer", "minimum": 0})]

#: A 32-bit integer (a variant's ``priority``): a string or a float is refused by the schema.
Int32 = Annotated[
    int,
    WithJsonSchema(
        {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
    ),
]


#: A Kubernetes resource quantity (``96``, ``500m``, ``384Gi``): an int or a string, checked by
#: ``arcflow.common.quantity`` in validation and by the CRD's CEL rule on the API server.
def _int_or_string(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PydanticCustomError(
            "quantity_type",
            "must be a non-negative quantity such as 96, 500m, 384Gi or 1.5 (an integer or a "
            "string)",
        )
    return value


Quantity = Annotated[
    int | str,
    PlainValidator(_int_or_string),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "maxLength": 64,
            "x-kubernetes-validations": [
                {
                    "rule": "isQuantity(string(self))"
                    " && !quantity(string(self)).isLessThan(quantity('0'))",
                    "message": "must be a non-negative quantity such as 96, 500m, 384Gi or 1.5",
                }
            ],
        }
    ),
]

#: A 64-bit integer as controller-gen renders Go's ``int64``.
Int64 = Annotated[int, WithJsonSchema({"type": "integer", "format": "int64"})]


class InvalidManifestError(ValueError):
    """A manifest does not match the schema of its kind.

    ``problems`` holds ``(field path, message)`` pairs. Unlike pydantic's ValidationError the
    message never contains input values, so a credential pasted into the wrong field cannot
    reach a log line through this exception.
    """

    def __init__(self, kind: str, problems: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.problems = problems
        listed = "; ".join(f"{path}: {message}" for path, message in problems)
        super().__init__(f"invalid {kind} manifest: {listed}")


_JSON_TYPE_NAMES: dict[type, str] = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def format_path(loc: tuple[int | str, ...]) -> str:
    """``('spec', 'runnerVariants', 1, 'name')`` -> ``spec.runnerVariants[1].name``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def schema_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """``(path, message)`` per pydantic error, naming the *type* given but never the value."""
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        if err["type"] == "missing":
            message = "is required"
        elif err["type"] == "literal_error":
            message = f"must be {err.get('ctx', {}).get('expected', '')}"
        else:
            message = str(err["msg"])
            message = message[:1].lower() + message[1:]
            got = _JSON_TYPE_NAMES.get(type(err.get("input")), "a value of another type")
            message = f"{message}, got {got}"
        problems.append((format_path(err["loc"]), message))
    return problems


class KubeModel(BaseModel):
    """Base of every arcflow CRD model: camelCase JSON keys, strict types, unknown keys kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
        use_attribute_docstrings=True,
    )

    #: Python field names that are serialised even when never set (Go fields without omitempty).
    _always_serialised: ClassVar[tuple[str, ...]] = ()
    #: Python field names dropped from the output when their value is 0 (Go ``int,omitempty``).
    _omitted_when_zero: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _serialise_like_go(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        if not self._always_serialised and not self._omitted_when_zero:
            return data
        fields = type(self).model_fields

        def key_of(name: str) -> str:
            return (fields[name].alias or name) if info.by_alias else name

        for name in self._always_serialised:
            data.setdefault(key_of(name), getattr(self, name))
        for name in self._omitted_when_zero:
            if data.get(key_of(name)) == 0:
                del data[key_of(name)]
        # Keep declared field order (apiVersion and kind first), then unknown keys.
        ordered = {key_of(name): data[key_of(name)] for name in fields if key_of(name) in data}
        ordered.update((key, value) for key, value in data.items() if key not in ordered)
        return ordered


class ResourceMeta(KubeModel):
    """Labels and annotations to put on a child object arcflow creates."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class OwnerReference(KubeModel):
    """A Kubernetes owner reference (garbage collection and controller ownership)."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class LocalObjectReference(KubeModel):
    """A reference to an object by name in the same namespace (e.g. an image pull secret)."""

    name: str = ""


class ObjectMeta(KubeModel):
    """Kubernetes object metadata; keys not modelled here (managedFields, ...) are preserved."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None


class KubeObject(KubeModel):
    """Fields shared by the four top-level kinds, plus manifest (dict) conversion."""

    _always_serialised: ClassVar[tuple[str, ...]] = ("api_version", "kind")

    api_version: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    # The manifest an observed object was parsed from (``from_observed``); ``None`` otherwise.
    _observed: dict[str, Any] | None = PrivateAttr(default=None)

    @classmethod
    def from_manifest(cls, doc: dict[str, Any]) -> Self:
        """Parse a manifest dict; raise :class:`InvalidManifestError` (a ValueError) if invalid.

        The input is deep-copied so later edits of the model never alter the caller's dict.
        """
        return cls._parse(copy.deepcopy(doc))

    @classmethod
    def from_observed(cls, doc: dict[str, Any]) -> Self:
        """Parse an object as read from the cluster, without copying it first (ADR 0050).

        For read-only callers (the reconciler's controllers): the model builds its own
        containers for the fields it models, but shares what it keeps verbatim (pod
        templates, unknown keys) with ``doc``, and keeps ``doc`` itself as :attr:`manifest`.
        Neither may be changed: ``doc`` may be the object a cache holds.
        """
        parsed = cls._parse(doc)
        parsed._observed = doc
        return parsed

    @classmethod
    def _parse(cls, doc: dict[str, Any]) -> Self:
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            kind = cls.model_fields["kind"].default
            raise InvalidManifestError(str(kind), schema_problems(exc)) from None

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest this object was observed as (read-only, see :meth:`from_observed`),
        for builders that take manifests and for merge patches against the live document;
        a model built in code gives :meth:`to_manifest`."""
        return self._observed if self._observed is not None else self.to_manifest()

    def to_manifest(self) -> dict[str, Any]:
        """The manifest dict: camelCase keys, only the fields that were set (plus Go always-on)."""
        data: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return data

    @property
    def name(self) -> str:
        """``metadata.name`` or ``""`` (convenience for builders and log lines)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` or ``""``."""
        return self.metadata.namespace or ""

    @property
    def uid(self) -> str:
        """``metadata.uid`` or ``""``."""
        return self.metadata.uid or ""

    @property
    def resource_version(self) -> str | None:
        """``metadata.resourceVersion`` (the precondition of a conditional write)."""
        return self.metadata.resource_version

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels`` (``{}`` when unset; the model's own dict)."""
        return self.metadata.labels or {}

    @property
    def annotations(self) -> dict[str, str]:
        """``metadata.annotations`` (``{}`` when unset; the model's own dict)."""
        return self.metadata.annotations or {}

    @property
    def finalizers(self) -> list[str]:
        """``metadata.finalizers`` (``[]`` when unset)."""
        return list(self.metadata.finalizers or [])

    @property
    def is_deleting(self) -> bool:
        """``metadata.deletionTimestamp`` is set: the object is being deleted."""
        return bool(self.metadata.deletion_timestamp)
