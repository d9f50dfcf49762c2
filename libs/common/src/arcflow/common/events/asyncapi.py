"""The AsyncAPI 3.0 document of arcflow's persisted events and its request/reply operations,
built from the models and the services' declared RPC endpoints (pure).

Built from the pydantic JSON schemas and the subject/stream table rather than from faststream's
generator: our consumers receive raw messages (to dead-letter malformed ones), so faststream
sees no payload type on them, and producers publish through ``publish_event``. The table below
is the single place that says which event types travel on which subject.
``scripts/generate_asyncapi.py`` writes it to ``docs/asyncapi.json`` with the durable consumers
and the RPC endpoints the services' specs declare; ``tests/flow`` keeps it current.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic.json_schema import models_json_schema

from arcflow.common.events.catalog import (
    EVENT_TYPES,
    DeadLetter,
    JobsBatch,
    K8sObjectChanged,
    ObjectWritten,
    RegistrationFailed,
    RunnerLifecycle,
    ScaleDecision,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SessionFailed,
    SessionOpened,
    SpecInvalid,
)
from arcflow.common.events.envelope import EventBase
from arcflow.common.nats.jetstream import (
    CONSUMERS,
    KV_BUCKETS,
    STREAMS,
    ConsumerSpec,
    stream_for_subject,
)

if TYPE_CHECKING:
    from arcflow.common.service.endpoints import RpcEndpoint

_TOKEN_NOTE: Final = "encoded token: '' -> '_', '.' -> '~'"


@dataclass(frozen=True, slots=True)
class ChannelDoc:
    """One subject family: its address template, events, producer and meaning."""

    key: str
    address: str
    parameters: tuple[tuple[str, str], ...]
    events: tuple[type[EventBase], ...]
    producer: str
    description: str


CHANNELS: Final[tuple[ChannelDoc, ...]] = (
    ChannelDoc(
        "k8s",
        "arc.k8s.{resource}.{namespace}.{name}",
        (
            ("resource", "lower-case plural resource, e.g. autoscalingrunnersets, pods"),
            ("namespace", f"object namespace ({_TOKEN_NOTE})"),
            ("name", f"object name ({_TOKEN_NOTE})"),
        ),
        (K8sObjectChanged,),
        "watcher",
        "A watched Kubernetes object changed (metadata only: never spec or data).",
    ),
    ChannelDoc(
        "scalesets",
        "arc.scalesets.{namespace}.{ars}.{variant}",
        (),
        (ScaleSetAssigned, ScaleSetDeleted),
        "registrar",
        "A variant's GitHub runner scale set was assigned (created/updated) or deleted.",
    ),
    ChannelDoc(
        "jobs",
        "arc.jobs.{namespace}.{ars}.{variant}",
        (),
        (JobsBatch,),
        "listener (session pump)",
        "One GitHub message per scale set: statistics and job messages, no secrets.",
    ),
    ChannelDoc(
        "scale",
        "arc.scale.{namespace}.{ars}.{variant}",
        (),
        (ScaleDecision,),
        "listener (worker)",
        "A worker computed the desired replicas and patched its EphemeralRunnerSet.",
    ),
    ChannelDoc(
        "audit",
        "arc.audit.{namespace}.{ars}.{variant}",
        (),
        (ObjectWritten, RunnerLifecycle),
        "reconciler",
        "Every object the reconciler created, patched or deleted, and runner phase changes.",
    ),
    ChannelDoc(
        "errors",
        "arc.errors.{namespace}.{ars}",
        (),
        (SpecInvalid, RegistrationFailed, SessionFailed, SessionOpened),
        "reconciler, registrar, listener",
        "An ARS spec is invalid, a scale set could not be registered, or the listener could "
        "not open (or opened again) a scale set's message session.",
    ),
    ChannelDoc(
        "dlq",
        "arc.dlq.{original}",
        (("original", "the full original subject, e.g. arc.jobs.arc.big._"),),
        (DeadLetter,),
        "any consumer",
        "A message no handler could process: reason, delivery count, redacted payload.",
    ),
)

_KEY_PARAMS: Final = (
    ("namespace", f"ARS namespace ({_TOKEN_NOTE})"),
    ("ars", f"AutoscalingRunnerSet name ({_TOKEN_NOTE})"),
    ("variant", f"runner variant, '_' for the default variant ({_TOKEN_NOTE})"),
)


def _schemas(models: Sequence[type[Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    refs, top = models_json_schema(
        [(cls, "validation") for cls in models],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = dict(top.get("$defs", {}))
    names = {cls: refs[(cls, "validation")]["$ref"].rsplit("/", 1)[-1] for cls in models}
    return schemas, {cls.__name__: name for cls, name in names.items()}


def _rpc_docs(
    rpc: Sequence[tuple[str, RpcEndpoint]], names: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Channels, operations and messages of the declared request/reply endpoints (core NATS,
    never persisted): one channel per subject, its request and reply messages, and a
    ``receive`` operation with a ``reply`` by the service that serves it."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for server, endpoint in rpc:
        key = f"rpc_{server}_{endpoint.op.replace('-', '_')}"
        secret = " The reply carries a credential." if endpoint.carries_secret else ""
        channels[key] = {
            "address": endpoint.subject,
            "description": f"Core NATS request/reply, never persisted: {endpoint.description}."
            f"{secret}",
            "messages": {
                m.__name__: {"$ref": f"#/components/messages/{m.__name__}"}
                for m in (endpoint.request, endpoint.reply)
            },
        }
        for model in (endpoint.request, endpoint.reply):
            messages[model.__name__] = {
                "name": model.__name__,
                "title": model.__name__,
                "contentType": "application/json",
                "payload": {"$ref": f"#/components/schemas/{names[model.__name__]}"},
            }
        operations[f"serve_{key}"] = {
            "action": "receive",
            "summary": f"served by {server} (queue group {server}); the reply goes to the "
            "request's reply subject as {ok, result} or {ok: false, error}",
            "channel": {"$ref": f"#/channels/{key}"},
            "messages": [{"$ref": f"#/channels/{key}/messages/{endpoint.request.__name__}"}],
            "reply": {
                "channel": {"$ref": f"#/channels/{key}"},
                "messages": [{"$ref": f"#/channels/{key}/messages/{endpoint.reply.__name__}"}],
            },
        }
    return channels, operations, messages


def _event_type(cls: type[EventBase]) -> str:
    return str(cls.model_fields["type"].default)


def build_asyncapi_document(
    consumers: Sequence[ConsumerSpec] = CONSUMERS,
    rpc: Sequence[tuple[str, RpcEndpoint]] = (),
) -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document (deterministic, JSON-serialisable); ``rpc`` is each declared
    request/reply endpoint with the name of the service that serves it."""
    rpc_models = [m for _, e in rpc for m in (e.request, e.reply)]
    schemas, schema_names = _schemas([*EVENT_TYPES, *dict.fromkeys(rpc_models)])
    messages: dict[str, Any] = {}
    for cls in EVENT_TYPES:
        messages[cls.__name__] = {
            "name": _event_type(cls),
            "title": cls.__name__,
            "summary": (cls.__doc__ or "").strip().splitlines()[0],
            "contentType": "application/json",
            "headers": {"$ref": "#/components/schemas/NatsHeaders"},
            "payload": {"$ref": f"#/components/schemas/{schema_names[cls.__name__]}"},
        }
    schemas["NatsHeaders"] = {
        "type": "object",
        "properties": {
            "Nats-Msg-Id": {
                "type": "string",
                "description": "De-duplication id: '<type>:<fact key>' or the event id",
            },
            "Arcflow-Event-Type": {"type": "string", "description": "The event's type"},
            "traceparent": {"type": "string", "description": "W3C trace context"},
            "tracestate": {"type": "string", "description": "W3C trace state"},
        },
    }
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for channel in CHANNELS:
        params = channel.parameters or _KEY_PARAMS
        if channel.key == "errors":
            params = _KEY_PARAMS[:2]
        stream = stream_for_subject(f"arc.{channel.key}.x").name
        channels[channel.key] = {
            "address": channel.address,
            "description": f"{channel.description} JetStream stream {stream}.",
            "parameters": {name: {"description": text} for name, text in params},
            "messages": {
                cls.__name__: {"$ref": f"#/components/messages/{cls.__name__}"}
                for cls in channel.events
            },
        }
        operations[f"publish_{channel.key}"] = {
            "action": "send",
            "summary": f"published by {channel.producer}",
            "channel": {"$ref": f"#/channels/{channel.key}"},
            "messages": [
                {"$ref": f"#/channels/{channel.key}/messages/{cls.__name__}"}
                for cls in channel.events
            ],
        }
    for consumer in consumers:
        key = consumer.filter_subject.split(".")[1]
        operations[f"consume_{consumer.durable.replace('-', '_')}"] = {
            "action": "receive",
            "summary": f"durable pull consumer {consumer.durable} on {consumer.stream}, "
            f"filter {consumer.filter_subject}, max_deliver {consumer.max_deliver}",
            "channel": {"$ref": f"#/channels/{key}"},
        }
    rpc_channels, rpc_operations, rpc_messages = _rpc_docs(rpc, schema_names)
    channels.update(rpc_channels)
    operations.update(rpc_operations)
    messages.update(rpc_messages)
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "arcflow events",
            "version": "1",
            "description": (
                "Events arcflow services persist in NATS JetStream. Streams: "
                + ", ".join(f"{s.name} ({', '.join(s.subjects)})" for s in STREAMS)
                + ". KV buckets: "
                + ", ".join(b.bucket for b in KV_BUCKETS)
                + ". Request/reply (core NATS, never persisted): "
                + (", ".join(e.subject for _, e in rpc) or "none")
                + ". See docs/events.md."
            ),
        },
        "defaultContentType": "application/json",
        "servers": {
            "nats": {"host": "localhost:4222", "protocol": "nats", "description": "JetStream"}
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def render_asyncapi_json(
    consumers: Sequence[ConsumerSpec] = CONSUMERS, rpc: Sequence[tuple[str, RpcEndpoint]] = ()
) -> str:
    """The document as stable, pretty JSON text. ``docs/asyncapi.json`` holds it with the
    consumers and RPC endpoints the services' specs declare (``scripts/generate_asyncapi.py``
    collects them)."""
    return json.dumps(build_asyncapi_document(consumers, rpc), indent=2, sort_keys=True) + "\n"
