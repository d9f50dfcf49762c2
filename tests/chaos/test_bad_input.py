"""Bad input while a burst runs: invalid AutoscalingRunnerSets of every kind the validator
knows (plus template-less, huge and unicode ones), poison messages on every subject arcflow
consumes and bad requests on every RPC subject. Each must be explained (a False condition and
a Warning Event, the API server's refusal, a dead letter with a reason, an error reply) and
nothing else may break: the jobs queued after the attack run too, with the usual figures.

The subjects come from the services' declared specs (their subscriptions and RPC endpoints),
so a new subscription is attacked without editing this test; the listeners' job subjects get
the same poison and a forged batch, which nothing reads back (ADR 0104). The poison payloads
and bad requests are those of the flow and registrar tests.

It runs on the Kubernetes API emulator, not the real server: most of these ARSs are refused by
the CRD's structural schema on a real kube-apiserver (minimums, the variant name pattern, the
unknown field, the wrong type), so the fault it injects (an invalid ARS *stored* for arcflow to
explain) cannot be produced there. What the real server refuses is checked by the conformance
tests."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from arcflow.common.constants import ANNOTATION_LISTENER_REPLICAS
from arcflow.common.events import DeadLetter, JobsBatch, JobStatistics, encode_event, parse_event
from arcflow.common.kube import EPHEMERAL_RUNNER_SET, EVENT, InvalidError, NotFoundError
from arcflow.common.naming import ephemeral_runner_set_name
from arcflow.common.nats import STREAM_DLQ
from arcflow.common.subjects import jobs_subject
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.registrar.service import SERVICE as REGISTRAR
from arcflow.watcher.service import SERVICE as WATCHER
from services.registrar.tests.registrar_integration.test_rpc_bad_input import COMMON
from tests.chaos.harness import ARS_NAME, NAMESPACE, ChaosStack, burst_ars
from tests.chaos.outcome import Burst, figures_after, report
from tests.flow.test_poison_messages import POISON, _concrete
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

JOBS = 60
RUNNING_SECONDS = 4.0
SPECS = (WATCHER, REGISTRAR, RECONCILER)
Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return edit


def _variants(*variants: dict[str, Any]) -> Edit:
    return _set("spec.runnerVariants", list(variants))


def _no_template(doc: dict[str, Any]) -> None:
    del doc["spec"]["template"]


#: name -> (how the valid ARS is spoiled, the field the explanation must name)
INVALID: dict[str, tuple[Edit, str]] = {
    "bad-" + "n" * 42: (lambda _doc: None, "metadata.name"),
    "bad-set-name": (_set("spec.runnerScaleSetName", "s" * 46), "spec.runnerScaleSetName"),
    "bad-no-url": (_set("spec.githubConfigUrl", ""), "spec.githubConfigUrl"),
    "bad-url": (_set("spec.githubConfigUrl", "ftp://nowhere"), "spec.githubConfigUrl"),
    "bad-no-secret": (_set("spec.githubConfigSecret", ""), "spec.githubConfigSecret"),
    "bad-vault": (_set("spec.vaultConfig", {"type": "hashicorp"}), "spec.vaultConfig.type"),
    "bad-empty-label": (_set("spec.runnerScaleSetLabels", [""]), "spec.runnerScaleSetLabels[0]"),
    "bad-huge-label": (
        _set("spec.runnerScaleSetLabels", ["l" * 300]),
        "spec.runnerScaleSetLabels[0]",
    ),
    "bad-min": (_set("spec.minRunners", -1), "spec.minRunners"),
    "bad-max": (_set("spec.maxRunners", -1), "spec.maxRunners"),
    "bad-min-over-max": (_set("spec.minRunners", 50), "spec.maxRunners"),
    "bad-wrong-type": (_set("spec.maxRunners", "many"), "spec.maxRunners"),
    "bad-unknown-field": (_set("spec.minRunner", 1), "spec.minRunner"),
    "bad-replicas": (
        _set("metadata.annotations", {ANNOTATION_LISTENER_REPLICAS: "7"}),
        "metadata.annotations",
    ),
    "bad-no-template": (_no_template, "spec.template"),
    "bad-variant-template": (
        _variants({"name": "a", "template": {"spec": {"containers": []}}}),
        "spec.runnerVariants[0].template",
    ),
    "bad-variant-unnamed": (_variants({"name": ""}), "spec.runnerVariants[0].name"),
    "bad-variant-unicode": (_variants({"name": "gpü-✓"}), "spec.runnerVariants[0].name"),
    "bad-variant-twice": (_variants({"name": "a"}, {"name": "a"}), "spec.runnerVariants[1].name"),
    "bad-variant-long": (_variants({"name": "v" * 60}), "spec.runnerVariants[0].name"),
    "bad-variant-label": (
        _variants({"name": "a", "runnerScaleSetLabels": [""]}),
        "spec.runnerVariants[0].runnerScaleSetLabels[0]",
    ),
    "bad-variant-min": (_variants({"name": "a", "minRunners": -1}), "spec.runnerVariants[0]"),
    "bad-variant-min-max": (
        _variants({"name": "a", "minRunners": 9, "maxRunners": 1}),
        "spec.runnerVariants[0].maxRunners",
    ),
    "bad-huge": (
        _variants(*({"name": f"v{i}", "runnerScaleSetLabels": ["x" * 300]} for i in range(200))),
        "spec.runnerVariants[0].runnerScaleSetLabels[0]",
    ),
}
#: Refused by the API server itself (422): never stored, so nothing can act on them.
REFUSED: dict[str, dict[str, Any]] = {
    "unicode name": {"name": "bad-ünïcode"},
    "huge name": {"name": "bad-" + "h" * 300},
    "unicode label": {"name": "bad-label-value", "labels": {"team": "ünï ✓"}},
}


def invalid_manifests(config_url: str) -> dict[str, dict[str, Any]]:
    valid = burst_ars(config_url)
    docs = {}
    for name, (spoil, _field) in INVALID.items():
        doc = copy.deepcopy(valid)
        doc["metadata"]["name"] = name
        spoil(doc)
        docs[name] = doc
    return docs


async def running(burst: Burst) -> int:
    assert burst.stack.sim is not None
    engine = burst.stack.sim.engine
    return sum(1 for j in burst.jobs if engine.job(j).state.value == "running")


async def explained(stack: ChaosStack, names: list[str]) -> dict[str, str]:
    """name -> the SpecValid condition's message, once every ARS has a False one naming its
    field and a Warning Event."""
    assert stack.kube is not None
    events = (await stack.kube.list(EVENT, namespace=NAMESPACE)).items
    warned = {
        e["involvedObject"]["name"]
        for e in events
        if e.get("reason") == "InvalidSpec" and e.get("type") == "Warning"
    }
    found = {}
    for name in names:
        doc = await stack.kube.get("AutoscalingRunnerSet", name, NAMESPACE)
        conditions = (doc.get("status") or {}).get("conditions") or []
        spec_valid = next((c for c in conditions if c["type"] == "SpecValid"), None)
        assert spec_valid is not None, (name, conditions)
        assert spec_valid["status"] == "False", (name, spec_valid)
        assert INVALID[name][1] in spec_valid["message"], (name, spec_valid["message"][:300])
        assert name in warned, f"no InvalidSpec Event for {name}"
        found[name] = spec_valid["message"]
    return found


async def publish_poison(nc: Client, stack: ChaosStack) -> dict[str, tuple[str, str]]:
    """Every poison on every consumed subject; msg id -> (subject, what the reason says).

    The listeners' own subjects get the same poison and a schema-valid batch no listener
    published: nothing reads them back (ADR 0104), so they are never dead-lettered, and the
    burst scaling on regardless shows they were never acted on."""
    assert stack.sim is not None
    js = nc.jetstream()
    filters = [s.consumer.filter_subject for spec in SPECS for s in spec.subscriptions]
    ids = {s["name"]: s["id"] for s in stack.scale_sets()}
    listener = {
        jobs_subject(NAMESPACE, ARS_NAME, t.variant): ids[t.scale_set_name] for t in stack.targets
    }
    sent: dict[str, tuple[str, str]] = {}
    published = 0
    for filter_subject in [*filters, *listener]:
        cases = dict(POISON)
        if filter_subject in listener:
            batch = JobsBatch(
                source="attacker",
                scale_set_id=listener[filter_subject],
                message_id=10**12,
                session_id="forged",
                statistics=JobStatistics(total_assigned_jobs=40),
            )
            cases["forged"] = (encode_event(batch), "")
        for case, (payload, words) in cases.items():
            msg_id = f"badinput-{published}"
            published += 1
            subject = _concrete(filter_subject, case)
            await js.publish(subject, payload, timeout=30, headers={"Nats-Msg-Id": msg_id})
            if filter_subject not in listener:
                sent[msg_id] = (subject, words)
    return sent


async def dead_letters(nc: Client, sent: dict[str, tuple[str, str]]) -> dict[str, DeadLetter]:
    js = nc.jetstream()
    info = await js.stream_info(STREAM_DLQ.name)
    found = {}
    for seq in range(info.state.first_seq or 1, info.state.last_seq + 1):
        event = parse_event((await js.get_msg(STREAM_DLQ.name, seq)).data or b"")
        assert isinstance(event, DeadLetter)
        if event.original_msg_id in sent:
            found[event.original_msg_id] = event
    assert set(found) == set(sent), f"{len(found)}/{len(sent)} dead-lettered"
    return found


async def bad_requests(nc: Client) -> dict[str, int]:
    """Every bad request on every RPC subject; error code -> replies."""
    codes: dict[str, int] = {}
    for endpoint in (e for spec in SPECS for e in spec.rpc):
        for what, payload in COMMON.items():
            reply = await nc.request(endpoint.subject, payload, timeout=10)
            body = json.loads(reply.data)
            assert body["ok"] is False, (endpoint.subject, what, body)
            assert body["error"]["reason"], (endpoint.subject, what, body)
            codes[body["error"]["code"]] = codes.get(body["error"]["code"], 0) + 1
    return codes


async def test_bad_input_mid_burst_is_explained_and_breaks_nothing(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path, "emulator") as stack:
        kube, sim = stack.kube, stack.sim
        assert kube is not None
        assert sim is not None
        nc = await nats.connect(stack.nats_url)
        try:
            began = time.monotonic()
            burst = Burst(stack)
            # The first half runs long enough that the bad input lands while its runners work.
            burst.enqueue(JOBS // 2, duration=RUNNING_SECONDS)
            await eventually(lambda: running(burst), within=120, what="runners at work")
            running_at_start = await running(burst)
            back_after: dict[str, float] = {}

            mark = time.monotonic()
            for doc in invalid_manifests(sim.config_url()).values():
                await kube.create(doc)
            refused = 0
            for meta in REFUSED.values():
                doc = burst_ars(sim.config_url())
                doc["metadata"].update(meta)
                with pytest.raises(InvalidError):
                    await kube.create(doc)
                with pytest.raises(NotFoundError):
                    await kube.get("AutoscalingRunnerSet", meta["name"], NAMESPACE)
                refused += 1
            back_after["invalid ARS applied"] = round(time.monotonic() - mark, 2)

            mark = time.monotonic()
            sent = await publish_poison(nc, stack)
            back_after["poison published"] = round(time.monotonic() - mark, 2)
            mark = time.monotonic()
            codes = await bad_requests(nc)
            back_after["bad requests answered"] = round(time.monotonic() - mark, 2)
            last_event = time.monotonic()
            # The second half is queued after every bad input: scaling must go on.
            unfinished = len(burst.jobs) - burst.completed()
            burst.enqueue(JOBS - JOBS // 2)

            messages = await eventually(
                lambda: explained(stack, list(INVALID)), within=60, what="every ARS explained"
            )
            letters = await eventually(
                lambda: dead_letters(nc, sent), within=60, what="every poison dead-lettered"
            )
            for msg_id, letter in letters.items():
                subject, words = sent[msg_id]
                assert letter.delivery_count == 1, (subject, letter.reason)
                assert words in letter.reason, (subject, words, letter.reason)

            await burst.wait_completed(JOBS, within=120)
            figures = await figures_after(burst, last_event=last_event)
            report("bad input", began, back_after, figures)
            runner_sets = (await kube.list(EPHEMERAL_RUNNER_SET, namespace=NAMESPACE)).items
            warnings = [
                e
                for e in (await kube.list(EVENT, namespace=NAMESPACE)).items
                if e.get("reason") == "InvalidSpec"
            ]
            print(
                json.dumps(
                    {
                        "jobs running when the bad input began": running_at_start,
                        "jobs unfinished when it ended": unfinished,
                        "invalid ARS explained": len(messages),
                        "refused by the API server": refused,
                        "longest condition message": max(len(m) for m in messages.values()),
                        "longest Event message": max(len(e["message"]) for e in warnings),
                        "poison dead-lettered": len(letters),
                        "subjects": len({s for s, _ in sent.values()}),
                        "RPC error replies": codes,
                    }
                )
            )
            assert {s["name"] for s in stack.scale_sets()} == {
                t.scale_set_name for t in stack.targets
            }, "an invalid ARS registered a scale set"
            assert {r["metadata"]["name"] for r in runner_sets} == {
                ephemeral_runner_set_name(ARS_NAME, t.variant) for t in stack.targets
            }
            assert figures.restarts == {"watcher": 0, "registrar": 0, "reconciler": 0}
            assert figures.problems() == []
        finally:
            await nc.drain()
