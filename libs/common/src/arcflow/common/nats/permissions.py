"""Least-privilege NATS permissions per service, derived from the subjects and JetStream layout.

Why generated: the subjects a service may use follow from what its code does (the streams it
declares, the durables it consumes, the KV buckets it reads or writes, the RPC it serves or
calls). Writing them by hand drifts; deriving them from :mod:`arcflow.common.subjects` and
:mod:`arcflow.common.nats.jetstream` keeps one source of truth. ``scripts/
generate_nats_permissions.py`` renders them into ``deploy/nats/authorization.conf`` and into
each Helm chart; tests run every service against a real nats-server with exactly these lists.

What JetStream needs besides the data subjects (nats-py 2.14, pinned by ADR 0070, against
nats-server 2.10+):

* a JetStream publish is a request: publish on the data subject, the PubAck comes back on the
  client's inbox. Each service connects with its own inbox prefix ``_INBOX_<service>``
  (:func:`arcflow.common.nats.connection.service_inbox_prefix`) and may subscribe only to
  ``_INBOX_<service>.>``: nobody can read another client's replies (the registrar's JIT
  configs to the reconciler travel on the reconciler's inbox);
* every JetStream API call is a request on ``$JS.API.<...>`` answered on the inbox;
* ``ensure_stream`` publishes ``STREAM.CREATE.<S>`` then, if the stream exists with another
  configuration, ``STREAM.UPDATE.<S>``; ``js.key_value`` reads ``STREAM.INFO.KV_<bucket>``;
* creating a named consumer is ``CONSUMER.CREATE.<S>.<C>[.<filter>]`` (older clients:
  ``CONSUMER.DURABLE.CREATE.<S>.<C>``); a pull fetch is ``CONSUMER.MSG.NEXT.<S>.<C>``; acks go to
  ``$JS.ACK.<S>.<C>.>``;
* a KV write publishes ``$KV.<bucket>.<key>``; a KV read is ``DIRECT.GET.KV_<bucket>.>`` (the
  buckets allow direct gets) or ``STREAM.MSG.GET.KV_<bucket>``; a KV watch is an ordered push
  consumer on ``KV_<bucket>`` whose flow-control replies go to ``$JS.FC.KV_<bucket>.>``, after a
  ``STREAM.NAMES`` lookup of the bucket's stream.

NATS permissions match whole tokens, so a consumer name that is a hash (the listener's
``listener-jobs-<hash>``, the auditor's ephemeral ``<nuid>``) is matched with ``*``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from arcflow.common import subjects
from arcflow.common.nats.connection import service_inbox_prefix
from arcflow.common.nats.jetstream import (
    CONSUMER_RECONCILER_ERRORS,
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    KV_BUCKETS,
    KV_SCALESETS,
    KV_WATCH,
    STREAM_AUDIT,
    STREAM_DLQ,
    STREAM_ERRORS,
    STREAM_JOBS,
    STREAM_K8S,
    STREAM_SCALE,
    STREAM_SCALESETS,
    STREAMS,
    StreamSpec,
)

JS_API: Final = "$JS.API"
#: Matches one hashed or generated consumer name (one token).
ANY_CONSUMER: Final = "*"

#: The registrar's own durable and bucket (declared in ``arcflow.registrar``, which common may
#: not import; ``tests/security`` checks these names against the registrar's constants).
REGISTRAR_ERS_DURABLE: Final = "registrar-ers"
REGISTRAR_LOCKS_BUCKET: Final = "arcflow_registrar_locks"
#: The listener's own bucket of open message sessions (declared in ``arcflow.listener.sessions``;
#: ``tests/security`` checks the name).
LISTENER_SESSIONS_BUCKET: Final = "arcflow_listener_sessions"
LISTENER_LEASES_BUCKET: Final = "arcflow_listener_leases"
#: Queue group the registrar replicas serve RPC in (``arcflow.common.rpc.registrar``).
REGISTRAR_RPC_QUEUE: Final = "registrar"
REGISTRAR_RPC_SUBJECTS: Final[tuple[str, ...]] = (
    subjects.registrar_rpc_subject("jitconfig"),
    subjects.registrar_rpc_subject("remove-runner"),
    subjects.registrar_rpc_subject("get-runner"),
    subjects.registrar_rpc_subject("list-runners"),
)
#: Served by the registrar too, called by no service: ``arcflow doctor``'s look at GitHub's
#: view of a set (ADR 0064). Not in the reconciler's list (it never asks).
REGISTRAR_DOCTOR_SUBJECTS: Final[tuple[str, ...]] = (subjects.registrar_rpc_subject("scale-sets"),)

SERVICES: Final[tuple[str, ...]] = ("watcher", "registrar", "reconciler", "listener", "auditor")


@dataclass(frozen=True, slots=True)
class Permissions:
    """What one NATS user may publish and subscribe to.

    ``subscribe`` entries may name a queue group after a space (``"subject queue"``): the user
    may then subscribe to that subject only as a member of that queue group.
    ``allow_responses``: the user may publish one reply to the reply subject of each request it
    received (the registrar answers RPC without publishing to inboxes in general).
    """

    service: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    allow_responses: bool = False
    why: str = ""

    def may_publish(self, subject: str) -> bool:
        """Whether the server lets this user publish on the concrete ``subject``."""
        return any(subject_matches(pattern, subject) for pattern in self.publish)

    def may_subscribe(self, subject: str, queue: str | None = None) -> bool:
        """Whether the server lets this user subscribe to ``subject`` (in ``queue``)."""
        for entry in self.subscribe:
            pattern, _, required_queue = entry.partition(" ")
            if required_queue and queue != required_queue:
                continue
            if subject_matches(pattern, subject):
                return True
        return False

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (the Helm charts' ``files/nats-permissions.json``)."""
        return {
            "publish": {"allow": list(self.publish)},
            "subscribe": {"allow": list(self.subscribe)},
            "allow_responses": self.allow_responses,
            "why": self.why,
        }


# --- building blocks (pure) ----------------------------------------------------------------


def inbox_subscription(service: str) -> str:
    """The inbox ``service`` receives replies on (requests, JetStream API answers, fetched
    messages, PubAcks): ``_INBOX_<service>.>``, never the shared ``_INBOX.>``."""
    return f"{service_inbox_prefix(service)}.>"


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS token matching: ``*`` is one token, a final ``>`` one or more; else literal.

    ``subject`` may itself hold wildcards (a subscription): they then match only the same
    wildcard or a wider one in ``pattern``, as the server checks subscribe permissions.
    """
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have):
            return False
        if token == "*":
            if have[index] == ">":
                return False
            continue
        if token != have[index]:
            return False
    return len(want) == len(have)


def _api(*tokens: str) -> str:
    return ".".join((JS_API, *tokens))


def stream_info(stream: str) -> list[str]:
    """Read a stream's configuration and state."""
    return [_api("STREAM", "INFO", stream)]


def stream_declare(stream: str) -> list[str]:
    """What ``ensure_stream`` (and ``ensure_bucket`` for ``KV_<bucket>``) publishes."""
    return [_api("STREAM", "CREATE", stream), _api("STREAM", "UPDATE", stream)]


def consumer_declare(stream: str, consumer: str) -> list[str]:
    """Create or update a named consumer, with or without a filter subject in the request."""
    return [
        _api("CONSUMER", "CREATE", stream, consumer),
        _api("CONSUMER", "CREATE", stream, consumer, ">"),
        _api("CONSUMER", "DURABLE", "CREATE", stream, consumer),
    ]


def consumer_pull(stream: str, consumer: str, *, ack: bool = True) -> list[str]:
    """Bind to an existing pull consumer, read its info, fetch, and (optionally) ack."""
    allowed = [
        _api("CONSUMER", "INFO", stream, consumer),
        _api("CONSUMER", "MSG", "NEXT", stream, consumer),
    ]
    if ack:
        allowed.append(f"$JS.ACK.{stream}.{consumer}.>")
    return allowed


def stream_msg_get(stream: str) -> list[str]:
    """Read single stored messages (``js.get_msg``/``get_last_msg``, direct or not)."""
    return [
        _api("STREAM", "MSG", "GET", stream),
        _api("DIRECT", "GET", stream),
        _api("DIRECT", "GET", stream, ">"),
    ]


def kv_stream(bucket: str) -> str:
    """The stream behind a KV bucket."""
    return f"KV_{bucket}"


def kv_read(bucket: str) -> list[str]:
    """``js.key_value(bucket)`` then ``get``."""
    return [*stream_info(kv_stream(bucket)), *stream_msg_get(kv_stream(bucket))]


def kv_write(bucket: str) -> list[str]:
    """``put``/``create``/``update``/``delete``: a JetStream publish on ``$KV.<bucket>.<key>``."""
    return [f"$KV.{bucket}.>"]


def ephemeral_consumer_create(stream: str) -> str:
    """Create an ephemeral consumer: the subject carries no consumer name."""
    return _api("CONSUMER", "CREATE", stream)


def flow_control_reply(stream: str) -> str:
    """Answer a push consumer's flow-control and heartbeat requests."""
    return f"$JS.FC.{stream}.>"


def kv_watch(bucket: str) -> list[str]:
    """``kv.watch``: an ordered push consumer, created ephemeral (nats-py names none), whose
    info it reads by its generated name; it never deletes a consumer. nats-py 2.14 (pinned,
    ADR 0070) first looks the bucket's stream up by subject (``STREAM.NAMES``, which answers
    stream names only, never their messages)."""
    stream = kv_stream(bucket)
    return [
        _api("STREAM", "NAMES"),
        ephemeral_consumer_create(stream),
        _api("CONSUMER", "INFO", stream, ANY_CONSUMER),
        flow_control_reply(stream),
    ]


def data_subjects(*streams: StreamSpec) -> list[str]:
    """The subjects of ``streams`` (a JetStream publish targets them directly)."""
    return [subject for spec in streams for subject in spec.subjects]


def ensure_jetstream_publish(
    consumers: Iterable[tuple[str, str]], buckets: Iterable[str] = ()
) -> list[str]:
    """What ``ensure_jetstream`` publishes: every stream and KV bucket of the layout, the given
    consumers (``(stream, durable)``) and any extra buckets."""
    allowed: list[str] = []
    for spec in STREAMS:
        allowed += stream_declare(spec.name) + stream_info(spec.name)
    for bucket in [*(b.bucket for b in KV_BUCKETS), *buckets]:
        allowed += stream_declare(kv_stream(bucket)) + stream_info(kv_stream(bucket))
    for stream, durable in consumers:
        allowed += consumer_declare(stream, durable)
    return allowed


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _permissions(
    service: str,
    publish: Iterable[str],
    subscribe: Iterable[str],
    *,
    allow_responses: bool = False,
    why: str,
) -> Permissions:
    return Permissions(
        service=service,
        publish=_unique([_api("INFO"), *publish]),
        subscribe=_unique(subscribe),
        allow_responses=allow_responses,
        why=why,
    )


# --- per service ---------------------------------------------------------------------------


def watcher_permissions() -> Permissions:
    """Publishes object changes; declares the layout (``ensure_jetstream(consumers=())``)."""
    return _permissions(
        "watcher",
        [
            *data_subjects(STREAM_K8S),
            *ensure_jetstream_publish(()),
            *kv_read(KV_WATCH.bucket),
            *kv_write(KV_WATCH.bucket),
        ],
        [inbox_subscription("watcher")],
        why="publishes arc.k8s.> change events; keeps resume points in the arcflow_watch bucket; "
        "declares streams and buckets at start-up",
    )


def registrar_permissions() -> Permissions:
    """Consumes ARS/ERS changes, publishes assignments and errors, serves the RPC."""
    durables = [
        (CONSUMER_REGISTRAR_ARS.stream, CONSUMER_REGISTRAR_ARS.durable),
        (STREAM_K8S.name, REGISTRAR_ERS_DURABLE),
    ]
    publish = [
        *data_subjects(STREAM_SCALESETS, STREAM_ERRORS, STREAM_DLQ),
        *ensure_jetstream_publish(durables, [REGISTRAR_LOCKS_BUCKET]),
    ]
    for stream, durable in durables:
        publish += consumer_pull(stream, durable)
    for bucket in (KV_SCALESETS.bucket, REGISTRAR_LOCKS_BUCKET):
        publish += kv_read(bucket) + kv_write(bucket)
    publish += kv_watch(KV_SCALESETS.bucket)
    rpc = [
        f"{subject} {REGISTRAR_RPC_QUEUE}"
        for subject in (*REGISTRAR_RPC_SUBJECTS, *REGISTRAR_DOCTOR_SUBJECTS)
    ]
    return _permissions(
        "registrar",
        publish,
        [*rpc, inbox_subscription("registrar")],
        allow_responses=True,
        why="consumes registrar-ars/registrar-ers; publishes arc.scalesets.> and arc.errors.>; "
        "owns the arcflow_scalesets and lock buckets; serves arc.rpc.registrar.* in queue "
        "group 'registrar' and may answer only the requests it received (allow_responses)",
    )


def reconciler_permissions() -> Permissions:
    """Consumes assignments and failures, calls the registrar RPC, publishes audit events
    (Kubernetes changes come from its own watch, not from ``arc.k8s.>``: ADR 0069)."""
    durables = [
        (CONSUMER_RECONCILER_SCALESETS.stream, CONSUMER_RECONCILER_SCALESETS.durable),
        (CONSUMER_RECONCILER_ERRORS.stream, CONSUMER_RECONCILER_ERRORS.durable),
    ]
    publish = [
        *data_subjects(STREAM_AUDIT, STREAM_DLQ),
        *ensure_jetstream_publish(durables),
        *REGISTRAR_RPC_SUBJECTS,
        *kv_read(KV_SCALESETS.bucket),
        # Its ARS passes read the records from a live watch of the bucket (ADR 0122).
        *kv_watch(KV_SCALESETS.bucket),
        # Read-only: which listener sessions are open (ListenerSessionsOpen, ADR 0073).
        *kv_read(LISTENER_SESSIONS_BUCKET),
    ]
    for stream, durable in durables:
        publish += consumer_pull(stream, durable)
    return _permissions(
        "reconciler",
        publish,
        [inbox_subscription("reconciler")],
        why="consumes reconciler-scalesets/reconciler-errors; publishes "
        "arc.audit.>; calls arc.rpc.registrar.* (replies on its inbox); reads and watches "
        "arcflow_scalesets and reads arcflow_listener_sessions; declares the layout at start-up",
    )


def listener_permissions() -> Permissions:
    """Publishes job batches and scale decisions; consumes nothing (ADR 0104)."""
    # ARC_ERRORS: publish only (session.failed/opened, ADR 0064); no declare, no consumer.
    publish = [*data_subjects(STREAM_JOBS, STREAM_SCALE, STREAM_ERRORS)]
    for spec in (STREAM_JOBS, STREAM_SCALE):
        publish += stream_declare(spec.name)
    # Its last decision (the watermark) and the jobs stream's end, read at each session start.
    publish += stream_msg_get(STREAM_SCALE.name) + stream_info(STREAM_JOBS.name)
    sessions = kv_stream(LISTENER_SESSIONS_BUCKET)
    publish += stream_declare(sessions) + kv_read(LISTENER_SESSIONS_BUCKET)
    publish += kv_write(LISTENER_SESSIONS_BUCKET)
    leases = kv_stream(LISTENER_LEASES_BUCKET)
    publish += stream_declare(leases) + kv_read(LISTENER_LEASES_BUCKET)
    publish += kv_write(LISTENER_LEASES_BUCKET)
    return _permissions(
        "listener",
        publish,
        [inbox_subscription("listener")],
        why="publishes arc.jobs.> and arc.scale.> (session pump and its decision) and "
        "arc.errors.> (session.failed/session.opened only); consumes nothing (ADR 0104); "
        "reads its last decision from ARC_SCALE and the end of ARC_JOBS; "
        "alone writes arcflow_listener_sessions (open message sessions) and "
        "arcflow_listener_leases (standby mode: which replica serves a scale set)",
    )


def auditor_permissions() -> Permissions:
    """What ``arcflow audit`` needs: ephemeral push consumers without acks on every stream.

    Only the ephemeral create subject (no consumer name token) is granted: nats-server refuses a
    durable or consumer name in the body of such a request, so the auditor can never create,
    update, pull from, ack or delete a named consumer, its own or a service's. Messages arrive
    on its own inbox; flow-control replies go to ``$JS.FC.<stream>.>``.
    """
    publish: list[str] = []
    for spec in STREAMS:
        publish += stream_info(spec.name)
        publish += [ephemeral_consumer_create(spec.name), flow_control_reply(spec.name)]
    return _permissions(
        "auditor",
        publish,
        [inbox_subscription("auditor")],
        why="read-only: ephemeral push consumers without acks on every stream, delivered to its "
        "own inbox; no named consumer, no pull, no data subject, no RPC, no KV",
    )


def build_service_permissions() -> dict[str, Permissions]:
    """Every service's permissions, in :data:`SERVICES` order."""
    return {
        "watcher": watcher_permissions(),
        "registrar": registrar_permissions(),
        "reconciler": reconciler_permissions(),
        "listener": listener_permissions(),
        "auditor": auditor_permissions(),
    }


SERVICE_PERMISSIONS: Final[dict[str, Permissions]] = build_service_permissions()


# --- rendering -------------------------------------------------------------------------------


def password_placeholder(service: str) -> str:
    """The nats-server config variable a service's password is read from (environment)."""
    return f"$ARCFLOW_{service.upper()}_PASSWORD"


def default_users() -> dict[str, tuple[str, str]]:
    """``service -> (user, password placeholder)`` for every service."""
    return {service: (f"arcflow-{service}", password_placeholder(service)) for service in SERVICES}


def _quote(value: str) -> str:
    return json.dumps(value)


def _list(values: Sequence[str], indent: str) -> str:
    inner = "".join(f"{indent}  {_quote(v)}\n" for v in values)
    return f"[\n{inner}{indent}]"


def render_nats_authorization(
    users: Mapping[str, tuple[str, str]],
    permissions: Mapping[str, Permissions] | None = None,
) -> str:
    """A nats-server ``authorization { users = [...] }`` block for ``users``.

    ``users`` maps a service to ``(user name, password)``; a password starting with ``$`` is
    written bare, so nats-server resolves it from its environment (never commit a real one).
    Raises ``ValueError`` for a service without permissions.
    """
    perms = SERVICE_PERMISSIONS if permissions is None else permissions
    lines = ["authorization {", "  users = ["]
    for service, (user, password) in users.items():
        if service not in perms:
            raise ValueError(f"no NATS permissions are defined for service {service!r}")
        p = perms[service]
        secret = password if password.startswith("$") else _quote(password)
        lines += [
            f"    # {service}: {p.why}",
            "    {",
            f"      user: {_quote(user)}",
            f"      password: {secret}",
            "      permissions {",
            f"        publish {{ allow: {_list(p.publish, '        ')} }}",
            f"        subscribe {{ allow: {_list(p.subscribe, '        ')} }}",
        ]
        if p.allow_responses:
            lines.append("        allow_responses: true")
        lines += ["      }", "    }"]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def permissions_json(services: Iterable[str] | None = None) -> str:
    """The permissions of ``services`` (default: all) as stable, pretty JSON (for the charts).

    Raises ``ValueError`` for an unknown service.
    """
    wanted = list(SERVICES if services is None else services)
    unknown = [s for s in wanted if s not in SERVICE_PERMISSIONS]
    if unknown:
        raise ValueError(f"no NATS permissions are defined for service(s) {unknown}")
    return json.dumps({s: SERVICE_PERMISSIONS[s].to_dict() for s in wanted}, indent=2) + "\n"


__all__ = [
    "LISTENER_LEASES_BUCKET",
    "LISTENER_SESSIONS_BUCKET",
    "REGISTRAR_DOCTOR_SUBJECTS",
    "REGISTRAR_ERS_DURABLE",
    "REGISTRAR_LOCKS_BUCKET",
    "REGISTRAR_RPC_QUEUE",
    "REGISTRAR_RPC_SUBJECTS",
    "SERVICES",
    "SERVICE_PERMISSIONS",
    "Permissions",
    "build_service_permissions",
    "default_users",
    "inbox_subscription",
    "password_placeholder",
    "permissions_json",
    "render_nats_authorization",
    "subject_matches",
]
