"""The front page tells the truth: every doc is listed, and every figure in README's Measured
table is written in the document its row links to (the figures are measured there, with the
command and the machine's load; the README only quotes them)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_readme_lists_every_doc() -> None:
    docs = _section(README, "Docs")
    missing = [
        p.relative_to(REPO).as_posix()
        for p in sorted((REPO / "docs").glob("*.md"))
        if p.relative_to(REPO).as_posix() not in docs
    ]
    assert not missing, f"README's Docs section does not list {missing}"


def test_benchmark_index_lists_every_result() -> None:
    index = (REPO / "docs/benchmarks/README.md").read_text()
    missing = [
        p.name
        for p in sorted((REPO / "docs/benchmarks").glob("*.md"))
        if p.name != "README.md" and f"({p.name})" not in index
    ]
    assert not missing, f"docs/benchmarks/README.md does not link {missing}"


def _measured_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in _section(README, "Measured").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 3 or cells[0] == "what":
            continue
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_every_measured_figure_is_in_the_doc_it_links() -> None:
    rows = _measured_rows()
    assert len(rows) >= 10, "README's Measured table was not found"
    wrong = []
    for what, figure, where in rows:
        link = re.search(r"\]\(([^)#]+)", where)
        if link is None:
            wrong.append(f"{what!r}: no link to the document that measured it")
            continue
        doc = (REPO / link.group(1)).read_text()
        numbers = re.findall(r"\d[\d,.]*\d|\d", figure)
        absent = [n for n in numbers if n not in doc]
        if absent:
            wrong.append(f"{what!r}: {absent} not in {link.group(1)}")
    assert not wrong, "README figures not found where they link:\n" + "\n".join(wrong)


# --- the mechanically checkable claims of README and docs/architecture.md (issue 32) --------

ARCHITECTURE = (REPO / "docs/architecture.md").read_text()
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _members(kind: str) -> list[Path]:
    """The workspace members under ``libs`` or ``services`` (pyproject's globs)."""
    import tomllib

    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]
    found = [p for g in globs["members"] if g.startswith(f"{kind}/") for p in REPO.glob(g)]
    return sorted(p for p in found if (p / "pyproject.toml").is_file())


def test_the_counts_of_services_and_libraries_are_the_workspaces() -> None:
    services, libraries = _members("services"), _members("libs")
    claim = (
        f"arcflow is {NUMBERS[len(services)]} services (`services/`: "
        + ", ".join(p.name for p in _in_flow_order(services))
        + f") and {NUMBERS[len(libraries)]}\nlibraries (`libs/`: "
    )
    assert claim in ARCHITECTURE, f"docs/architecture.md does not open with {claim!r}"
    # one image per service (deploy/docker/Dockerfile has a target each)
    assert f"the {NUMBERS[len(services)]} images" in README
    for library in libraries:
        assert f"`arcflow.{library.name}`" in ARCHITECTURE.split("\n\n", 2)[1]
    packages = _section(README, "How it works") if "\n## How it works\n" in README else README
    for member in (*services, *libraries):
        path = member.relative_to(REPO).as_posix()
        assert f"| `{path}` |" in packages, f"README's package table does not list {path}"


def _in_flow_order(services: list[Path]) -> list[Path]:
    order = ["watcher", "registrar", "reconciler", "listener"]
    return sorted(services, key=lambda p: order.index(p.name) if p.name in order else 99)


def test_the_rpc_operations_named_are_the_declared_ones() -> None:
    from arcflow.registrar.service import SERVICE as REGISTRAR

    ops = [e.op for e in REGISTRAR.rpc]
    secret = [e.op for e in REGISTRAR.rpc if e.carries_secret]
    assert f"the registrar's {NUMBERS[len(ops)]} operations" in ARCHITECTURE
    for op in ops:
        assert f"`{op}`" in ARCHITECTURE, f"docs/architecture.md does not name the {op} RPC"
    assert f"{NUMBERS[len(ops)]} request/reply operations" in README
    assert secret == ["jitconfig"]
    assert f"One of the {NUMBERS[len(ops)]}, `{secret[0]}`, answers with a runner's" in (
        " ".join(ARCHITECTURE.split())
    )


def test_the_registrar_and_permission_docs_list_every_declared_operation() -> None:
    from arcflow.registrar.service import SERVICE as REGISTRAR

    registrar_doc = (REPO / "docs/registrar.md").read_text()
    deploy_doc = (REPO / "docs/deploy.md").read_text()
    ops = [e.op for e in REGISTRAR.rpc]
    for endpoint in REGISTRAR.rpc:
        assert f"| `{endpoint.subject}` |" in registrar_doc, f"docs/registrar.md: {endpoint.op}"
    assert f"`arc.rpc.registrar.{{{','.join(ops)}}}`" in deploy_doc, "docs/deploy.md, NATS"


def _chart_rules(service: str) -> list[dict[str, object]]:
    """The fixed RBAC rules of a service chart (``<chart>.rules`` in ``_service.tpl``: YAML
    with template comments only, the same in every scope the chart renders)."""
    import yaml

    text = (REPO / f"deploy/helm/arcflow-{service}/templates/_service.tpl").read_text()
    found = re.search(
        r'\{\{-? define "arcflow-' + service + r'\.rules" -?\}\}(.*?)\{\{-? end -?\}\}', text, re.S
    )
    assert found, f"arcflow-{service} has no rules template"
    body = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", found.group(1), flags=re.S)
    assert "{{" not in body, f"arcflow-{service}'s rules are templated: render them with helm"
    rules = yaml.safe_load(body)
    assert isinstance(rules, list)
    return rules


def _writes(rules: list[dict[str, object]]) -> set[tuple[str, str]]:
    return {
        (str(resource), str(verb))
        for rule in rules
        for resource in rule["resources"]  # type: ignore[attr-defined]
        for verb in rule["verbs"]  # type: ignore[attr-defined]
        if verb in WRITE_VERBS
    }


def test_who_writes_what_is_what_the_roles_grant() -> None:
    """The reconciler writes what arcflow owns; the listener only patches ERSs and runners;
    the watcher and the registrar write nothing (docs/architecture.md, README)."""
    from arcflow.common.builders.listener import listener_role_rules

    assert _writes(_chart_rules("watcher")) == set()
    assert _writes(_chart_rules("registrar")) == set()
    reconciler = _writes(_chart_rules("reconciler"))
    for owned in ("ephemeralrunnersets", "ephemeralrunners", "autoscalinglisteners", "pods"):
        assert {(owned, "create"), (owned, "delete")} <= reconciler, owned
    listener = _writes(listener_role_rules(["set"]))
    assert listener == {
        ("ephemeralrunnersets", "patch"),
        ("ephemeralrunners", "patch"),
        ("ephemeralrunners/status", "patch"),
    }
    flat = " ".join(ARCHITECTURE.split())
    assert "It writes nothing to Kubernetes, nor does the watcher" in flat
    assert "its Role grants `patch` on those two kinds only" in flat


def test_the_listener_patches_only_the_fields_the_docs_name() -> None:
    from datetime import UTC, datetime

    from arcflow.common.constants import ANNOTATION_JOB_COMPLETED
    from arcflow.common.events import JobInfo
    from arcflow.listener.scaler import Decision, ers_patch, runner_completed_patch

    patch = ers_patch(
        Decision(target=3, patch_id=7, assigned_jobs=3, was_dirty=False), {"share": "1"}
    )
    assert patch == {
        "spec": {"patchID": 7, "replicas": 3},
        "metadata": {"annotations": {"share": "1"}},
    }
    completed = runner_completed_patch(JobInfo(message_type="JobCompleted"), datetime.now(UTC))
    assert list(completed) == ["metadata"]
    assert list(completed["metadata"]) == ["annotations"]
    assert list(completed["metadata"]["annotations"]) == [ANNOTATION_JOB_COMPLETED]
    flat = " ".join(ARCHITECTURE.split())
    assert (
        "merge-patches an EphemeralRunnerSet's `replicas`, `patchID` and capacity-share "
        "annotations (ADR 0062) and an EphemeralRunner's status (job fields) and "
        "job-completed annotation (ADR 0100)" in flat
    )
    readme = " ".join(README.split())
    assert (
        "patches ERS `replicas`, `patchID` and share annotations, and runner status and "
        "job-completed annotation" in readme
    )
