"""docs/asyncapi.json is generated from the models and stays current and self-consistent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from arcflow.common import subjects
from arcflow.common.events import EVENT_TYPES, JobInfo, JobsBatch, JobStatistics, encode_event
from arcflow.common.events.asyncapi import CHANNELS, build_asyncapi_document, render_asyncapi_json

REPO = Path(__file__).resolve().parents[4]
ASYNCAPI = REPO / "docs" / "asyncapi.json"
EVENTS_MD = REPO / "docs" / "events.md"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_every_event_has_a_channel_and_every_ref_resolves() -> None:
    doc = build_asyncapi_document()
    documented = {cls for channel in CHANNELS for cls in channel.events}
    assert documented == set(EVENT_TYPES)
    for ref in _refs(doc):
        node: Any = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        assert node is not None


def test_a_real_payload_validates_against_its_published_schema() -> None:
    doc = json.loads(render_asyncapi_json())
    schema = {**doc, "$ref": "#/components/schemas/JobsBatch"}
    event = JobsBatch(
        source="listener",
        scale_set_id=1,
        message_id=2,
        statistics=JobStatistics(total_assigned_jobs=1),
        jobs=[JobInfo(message_type="JobStarted", runner_name="r-1", job_id="j")],
    )
    jsonschema.Draft202012Validator(schema).validate(json.loads(encode_event(event)))
    bad = json.loads(encode_event(event))
    bad["statistics"] = "lots"
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_events_md_mentions_every_subject_family_and_event_type() -> None:
    text = EVENTS_MD.read_text()
    for channel in CHANNELS:
        assert channel.address in text
    for cls in EVENT_TYPES:
        assert f"`{cls.model_fields['type'].default}`" in text
    assert subjects.RPC_REGISTRAR_JITCONFIG in text
