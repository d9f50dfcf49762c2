"""Subject builders: reversible token encoding, wildcard filters, parse round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common import subjects
from arcflow.common.subjects import InvalidSubjectTokenError

k8s_names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?", fullmatch=True)
variants = st.one_of(
    st.just(""), st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
)


@given(k8s_names)
def test_token_round_trip_for_kubernetes_names(name: str) -> None:
    token = subjects.encode_token(name)
    assert "." not in token
    assert "*" not in token
    assert ">" not in token
    assert token
    assert subjects.decode_token(token) == name


def test_default_variant_and_dots_have_distinct_tokens() -> None:
    assert subjects.encode_token("") == "_"
    assert subjects.encode_token("my.ars") == "my~ars"
    assert subjects.jobs_subject("arc", "my.ars") == "arc.jobs.arc.my~ars._"
    assert subjects.jobs_subject("arc", "my.ars", "gpu") == "arc.jobs.arc.my~ars.gpu"


@pytest.mark.parametrize("bad", ["a b", "x*", "y>", "_", "~x", "a~b", "-lead", "ü", "a/b"])
def test_unencodable_values_are_rejected_with_reason(bad: str) -> None:
    with pytest.raises(InvalidSubjectTokenError, match="cannot be a subject key"):
        subjects.encode_token(bad)


@given(k8s_names, k8s_names, variants)
def test_variant_subjects_parse_back(ns: str, ars: str, variant: str) -> None:
    for build, domain in (
        (subjects.scalesets_subject, "scalesets"),
        (subjects.jobs_subject, "jobs"),
        (subjects.scale_subject, "scale"),
        (subjects.audit_subject, "audit"),
    ):
        keys = subjects.parse_subject(build(ns, ars, variant))
        assert (keys.domain, keys.namespace, keys.ars, keys.variant) == (domain, ns, ars, variant)


def test_k8s_errors_dlq_and_rpc_subjects() -> None:
    subject = subjects.k8s_subject("autoscalingrunnersets", "arc-runners", "big.one")
    assert subject == "arc.k8s.autoscalingrunnersets.arc-runners.big~one"
    keys = subjects.parse_subject(subject)
    assert (keys.resource, keys.namespace, keys.name) == (
        "autoscalingrunnersets",
        "arc-runners",
        "big.one",
    )
    assert subjects.errors_subject("ns", "ars") == "arc.errors.ns.ars"
    dlq = subjects.dlq_subject(subjects.jobs_subject("ns", "ars", "gpu"))
    assert dlq == "arc.dlq.arc.jobs.ns.ars.gpu"
    parsed = subjects.parse_subject(dlq)
    assert parsed.domain == "dlq"
    assert parsed.original_subject == "arc.jobs.ns.ars.gpu"
    assert parsed.variant == "gpu"
    assert subjects.registrar_rpc_subject("remove-runner") == "arc.rpc.registrar.remove-runner"
    with pytest.raises(InvalidSubjectTokenError):
        subjects.registrar_rpc_subject("steal-token")  # type: ignore[arg-type]
    with pytest.raises(InvalidSubjectTokenError):
        subjects.k8s_subject("Pods", "ns", "x")
    with pytest.raises(InvalidSubjectTokenError):
        subjects.dlq_subject(dlq)


def _matches(filter_subject: str, subject: str) -> bool:
    """NATS wildcard semantics, for checking our filters."""
    f, s = filter_subject.split("."), subject.split(".")
    for i, tok in enumerate(f):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(f) == len(s)


def test_filters_select_exactly_the_scope() -> None:
    default = subjects.jobs_subject("ns", "ars")
    gpu = subjects.jobs_subject("ns", "ars", "gpu")
    other_ns = subjects.jobs_subject("other", "ars", "gpu")
    assert subjects.filter_for("jobs") == "arc.jobs.>"
    assert subjects.filter_for("jobs", "ns") == "arc.jobs.ns.>"
    only_default = subjects.filter_for("jobs", "ns", "ars", "")
    assert only_default == "arc.jobs.ns.ars._"
    assert _matches(only_default, default)
    assert not _matches(only_default, gpu)
    any_ns_gpu = subjects.filter_for("jobs", variant="gpu")
    assert any_ns_gpu == "arc.jobs.*.*.gpu"
    assert _matches(any_ns_gpu, gpu)
    assert _matches(any_ns_gpu, other_ns)
    assert not _matches(any_ns_gpu, default)
    assert subjects.filter_for("errors", "ns") == "arc.errors.ns.>"
    assert subjects.filter_for("errors", ars="a") == "arc.errors.*.a"
    assert subjects.filter_for("k8s", "ns") == "arc.k8s.*.ns.>"
    assert subjects.k8s_filter("pods", name="p.1") == "arc.k8s.pods.*.p~1"
    assert subjects.filter_for("dlq") == "arc.dlq.>"
    assert subjects.dlq_subject(subjects.filter_for("jobs", "ns")) == "arc.dlq.arc.jobs.ns.>"
    with pytest.raises(InvalidSubjectTokenError):
        subjects.filter_for("errors", variant="x")
    with pytest.raises(InvalidSubjectTokenError):
        subjects.filter_for("bogus")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    ["nats.jobs.a.b.c", "arc.jobs.a.b", "arc.jobs.a.b.c.d", "arc.k8s.pods.ns", "arc.jobs.a_b.c.d"],
)
def test_parse_subject_rejects_wrong_shapes(bad: str) -> None:
    with pytest.raises(InvalidSubjectTokenError):
        subjects.parse_subject(bad)
