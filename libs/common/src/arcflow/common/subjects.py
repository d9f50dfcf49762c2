"""NATS subject names: pure builders, parsers and auditor wildcard filters.

Every arcflow subject is hierarchical so auditors can filter with wildcards
(``arc.<domain>.<ns>.<ars>[.<variant>]``). Kubernetes names may contain dots and the default
variant is the empty string, neither of which is a valid NATS token, so each key is encoded
with :func:`encode_token`:

* the empty string (the default variant) becomes ``_``;
* ``.`` becomes ``~``.

Neither ``_`` nor ``~`` can appear in a Kubernetes name (RFC 1123: lower-case alphanumerics,
``-`` and ``.``), so the encoding is reversible. Values outside ``[A-Za-z0-9._-]`` are
rejected with :class:`InvalidSubjectTokenError` rather than silently mangled.

Kubernetes change subjects use the **lower-case plural resource name** (``pods``,
``autoscalingrunnersets``), the same word the API path uses, so one token identifies the
resource without a kind-to-plural table: ``arc.k8s.<resource>.<ns>.<name>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

PREFIX: Final = "arc"

DOMAIN_K8S: Final = "k8s"
DOMAIN_SCALESETS: Final = "scalesets"
DOMAIN_JOBS: Final = "jobs"
DOMAIN_SCALE: Final = "scale"
DOMAIN_AUDIT: Final = "audit"
DOMAIN_ERRORS: Final = "errors"
DOMAIN_DLQ: Final = "dlq"
DOMAIN_RPC: Final = "rpc"

#: Domains whose subjects are ``arc.<domain>.<ns>.<ars>.<variant>``.
VariantDomain = Literal["scalesets", "jobs", "scale", "audit"]
VARIANT_DOMAINS: Final[tuple[str, ...]] = (
    DOMAIN_SCALESETS,
    DOMAIN_JOBS,
    DOMAIN_SCALE,
    DOMAIN_AUDIT,
)
FilterDomain = Literal["k8s", "scalesets", "jobs", "scale", "audit", "errors", "dlq"]

DEFAULT_VARIANT_TOKEN: Final = "_"
DOT_REPLACEMENT: Final = "~"

RegistrarOp = Literal["jitconfig", "remove-runner", "get-runner", "list-runners", "scale-sets"]
RPC_REGISTRAR_JITCONFIG: Final = "arc.rpc.registrar.jitconfig"
RPC_REGISTRAR_REMOVE_RUNNER: Final = "arc.rpc.registrar.remove-runner"
RPC_REGISTRAR_GET_RUNNER: Final = "arc.rpc.registrar.get-runner"
RPC_REGISTRAR_LIST_RUNNERS: Final = "arc.rpc.registrar.list-runners"
#: GitHub's view of an ARS's scale sets, for ``arcflow doctor`` (read-only; ADR 0064).
RPC_REGISTRAR_SCALE_SETS: Final = "arc.rpc.registrar.scale-sets"
_REGISTRAR_OPS: Final = ("jitconfig", "remove-runner", "get-runner", "list-runners", "scale-sets")

_VALUE_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9~_-]*")
_RESOURCE_RE: Final = re.compile(r"[a-z0-9]+")


class InvalidSubjectTokenError(ValueError):
    """A key cannot be placed in a subject token, or a subject does not parse."""


def encode_token(value: str) -> str:
    """Encode a Kubernetes name or variant as one NATS subject token (reversible)."""
    if value == "":
        return DEFAULT_VARIANT_TOKEN
    if not _VALUE_RE.fullmatch(value):
        raise InvalidSubjectTokenError(
            f"{value!r} cannot be a subject key: expected [A-Za-z0-9][A-Za-z0-9._-]*"
        )
    return value.replace(".", DOT_REPLACEMENT)


def decode_token(token: str) -> str:
    """Invert :func:`encode_token`."""
    if token == DEFAULT_VARIANT_TOKEN:
        return ""
    if not _TOKEN_RE.fullmatch(token) or "_" in token:
        raise InvalidSubjectTokenError(f"{token!r} is not an encoded subject token")
    return token.replace(DOT_REPLACEMENT, ".")


def _resource_token(resource: str) -> str:
    if not _RESOURCE_RE.fullmatch(resource):
        raise InvalidSubjectTokenError(
            f"{resource!r} is not a lower-case plural resource name (e.g. 'pods')"
        )
    return resource


def k8s_subject(resource: str, namespace: str, name: str) -> str:
    """``arc.k8s.<resource>.<ns>.<name>``: a change of one Kubernetes object."""
    return ".".join(
        (PREFIX, DOMAIN_K8S, _resource_token(resource), encode_token(namespace), encode_token(name))
    )


def _variant_subject(domain: str, namespace: str, ars: str, variant: str) -> str:
    return ".".join(
        (PREFIX, domain, encode_token(namespace), encode_token(ars), encode_token(variant))
    )


def scalesets_subject(namespace: str, ars: str, variant: str = "") -> str:
    """``arc.scalesets.<ns>.<ars>.<variant>``: registrar assignments and deletions."""
    return _variant_subject(DOMAIN_SCALESETS, namespace, ars, variant)


def jobs_subject(namespace: str, ars: str, variant: str = "") -> str:
    """``arc.jobs.<ns>.<ars>.<variant>``: job message batches from the listener's session pump."""
    return _variant_subject(DOMAIN_JOBS, namespace, ars, variant)


def scale_subject(namespace: str, ars: str, variant: str = "") -> str:
    """``arc.scale.<ns>.<ars>.<variant>``: scaling decisions of the listener's workers."""
    return _variant_subject(DOMAIN_SCALE, namespace, ars, variant)


def audit_subject(namespace: str, ars: str, variant: str = "") -> str:
    """``arc.audit.<ns>.<ars>.<variant>``: every object the reconciler writes."""
    return _variant_subject(DOMAIN_AUDIT, namespace, ars, variant)


def errors_subject(namespace: str, ars: str) -> str:
    """``arc.errors.<ns>.<ars>``: invalid specs and registration failures."""
    return ".".join((PREFIX, DOMAIN_ERRORS, encode_token(namespace), encode_token(ars)))


def dlq_subject(original_subject: str) -> str:
    """``arc.dlq.<original subject>``: where a message goes after it could not be handled."""
    if not original_subject or original_subject.startswith(f"{PREFIX}.{DOMAIN_DLQ}."):
        raise InvalidSubjectTokenError(f"cannot dead-letter subject {original_subject!r}")
    return f"{PREFIX}.{DOMAIN_DLQ}.{original_subject}"


def registrar_rpc_subject(op: RegistrarOp) -> str:
    """``arc.rpc.registrar.<op>``: core-NATS request/reply, never persisted (``jitconfig``'s reply
    carries a runner credential)."""
    if op not in _REGISTRAR_OPS:
        raise InvalidSubjectTokenError(f"unknown registrar operation {op!r}")
    return f"{PREFIX}.{DOMAIN_RPC}.registrar.{op}"


def _filter_token(value: str | None) -> str:
    return "*" if value is None else encode_token(value)


def filter_for(
    domain: FilterDomain,
    namespace: str | None = None,
    ars: str | None = None,
    variant: str | None = None,
) -> str:
    """A wildcard subject selecting one domain, optionally narrowed by namespace/ARS/variant.

    ``None`` means "any". For ``k8s`` the second and third keys are namespace and object
    name (``ars`` narrows by object name); use :func:`k8s_filter` to also pick a resource.
    ``dlq`` takes no keys and gives ``arc.dlq.>``; narrow dead letters with
    ``dlq_subject(filter_for("jobs", "ns"))`` (``arc.dlq.arc.jobs.ns.>``).
    """
    if domain == DOMAIN_K8S:
        if variant is not None:
            raise InvalidSubjectTokenError("k8s subjects have no variant")
        return k8s_filter(namespace=namespace, name=ars)
    if domain == DOMAIN_DLQ:
        if namespace is not None or ars is not None or variant is not None:
            raise InvalidSubjectTokenError(
                "dlq filters take no keys; use dlq_subject(filter_for(...))"
            )
        return f"{PREFIX}.{DOMAIN_DLQ}.>"
    if domain == DOMAIN_ERRORS:
        if variant is not None:
            raise InvalidSubjectTokenError("errors subjects have no variant")
        tokens = [_filter_token(namespace), _filter_token(ars)]
    elif domain in VARIANT_DOMAINS:
        tokens = [_filter_token(namespace), _filter_token(ars), _filter_token(variant)]
    else:
        raise InvalidSubjectTokenError(f"unknown subject domain {domain!r}")
    while tokens and tokens[-1] == "*":
        tokens.pop()
    tail = ".".join([*tokens, ">"]) if len(tokens) < _arity(domain) else ".".join(tokens)
    return f"{PREFIX}.{domain}.{tail}"


def _arity(domain: str) -> int:
    return 2 if domain == DOMAIN_ERRORS else 3


def k8s_filter(
    resource: str | None = None, namespace: str | None = None, name: str | None = None
) -> str:
    """Wildcard over ``arc.k8s.<resource>.<ns>.<name>``; ``None`` means any."""
    tokens = [
        "*" if resource is None else _resource_token(resource),
        _filter_token(namespace),
        _filter_token(name),
    ]
    while tokens and tokens[-1] == "*":
        tokens.pop()
    tail = ".".join([*tokens, ">"]) if len(tokens) < 3 else ".".join(tokens)
    return f"{PREFIX}.{DOMAIN_K8S}.{tail}"


@dataclass(frozen=True, slots=True)
class SubjectKeys:
    """The decoded keys of a concrete (wildcard-free) arcflow subject."""

    domain: str
    namespace: str | None = None
    ars: str | None = None
    variant: str | None = None
    resource: str | None = None
    name: str | None = None
    original_subject: str | None = None


def parse_subject(subject: str) -> SubjectKeys:
    """Decode a concrete subject back into its keys (inverse of the builders)."""
    tokens = subject.split(".")
    if len(tokens) < 2 or tokens[0] != PREFIX:
        raise InvalidSubjectTokenError(f"{subject!r} is not an arcflow subject")
    domain, rest = tokens[1], tokens[2:]
    try:
        if domain == DOMAIN_K8S and len(rest) == 3:
            return SubjectKeys(
                domain=domain,
                resource=_resource_token(rest[0]),
                namespace=decode_token(rest[1]),
                name=decode_token(rest[2]),
            )
        if domain in VARIANT_DOMAINS and len(rest) == 3:
            return SubjectKeys(
                domain=domain,
                namespace=decode_token(rest[0]),
                ars=decode_token(rest[1]),
                variant=decode_token(rest[2]),
            )
        if domain == DOMAIN_ERRORS and len(rest) == 2:
            return SubjectKeys(
                domain=domain, namespace=decode_token(rest[0]), ars=decode_token(rest[1])
            )
        if domain == DOMAIN_DLQ and rest:
            original = ".".join(rest)
            inner = parse_subject(original)
            return SubjectKeys(
                domain=domain,
                namespace=inner.namespace,
                ars=inner.ars,
                variant=inner.variant,
                resource=inner.resource,
                name=inner.name,
                original_subject=original,
            )
        if domain == DOMAIN_RPC and len(rest) == 2:
            return SubjectKeys(domain=domain, name=".".join(rest))
    except InvalidSubjectTokenError as exc:
        raise InvalidSubjectTokenError(f"{subject!r} does not parse: {exc}") from exc
    raise InvalidSubjectTokenError(f"{subject!r} has the wrong shape for domain {domain!r}")
