"""The reconciler's reconcile shape holds (ADR 0071, docs/reconciler.md#the-reconcile-shape):

* the controllers' ``Context`` (and the registrar's, ADR 0095) is frozen and nobody sets its
  fields after it is built;
* dict walks (``.get("...")``) in ``controllers/`` only go down: each file has a ceiling, the
  count as of ADR 0071, to be lowered when a change removes some, never raised;
* a controller function takes a dict-typed manifest only where the reason is written here.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from arcflow.reconciler.controllers.base import Context
from arcflow.registrar.context import RegistrarContext

REPO = Path(__file__).resolve().parents[2]
RECONCILER = REPO / "services/reconciler"
REGISTRAR = REPO / "services/registrar"
CONTROLLERS = RECONCILER / "src/arcflow/reconciler/controllers"

#: ``.get("`` occurrences per file of ``controllers/`` (ADR 0071: 247 before, 131 after).
#: Lower a number when a change removes walks; a file not named here has none.
GET_CEILINGS: dict[str, int] = {
    "adapter.py": 7,  # the registrar helper's move; keys of an unparsable object
    "ars.py": 3,  # the status patch compared key by key with the live status
    "ars_children.py": 25,  # desired vs live ERS/AL documents (wire-form comparisons)
    "ars_outdated.py": 3,  # the loop-guard annotation's JSON records
    "ars_rules.py": 6,
    "ars_schedule_rules.py": 1,
    "ars_schedules.py": 1,
    "ars_spec.py": 9,  # an ARS that may not parse (SpecValid, version gate)
    "base.py": 6,  # decoded credential Secret data
    "capacity_rules.py": 3,
    "conditions.py": 3,  # conditions of an ARS manifest that may not parse
    "listener.py": 7,  # built vs live RBAC objects and Secrets (wire-form comparisons)
    "manifest.py": 8,  # the accessors of the manifests that stay manifests
    "quota_rules.py": 2,
    "registration_rules.py": 5,  # takes the wire-form condition (shared with sessions_rules)
    "runner.py": 4,  # decoded JIT data; the status patch vs the live status
    "runner_claims.py": 6,  # claim annotations' JSON
    "runner_set.py": 7,  # the live runner spec (its hash) and proxy Secret
    "runner_set_capacity.py": 5,
    "runner_set_rules.py": 3,  # SetRunner: the view of a set's runner documents (hot path)
    "server_tls.py": 2,  # the TLS block as the registrar and listener config read it
    "sessions_rules.py": 6,  # the wire-form condition, as registration_rules (ADR 0073)
}

_BUILT = "a manifest a builder made (the desired object): created, or compared with the live one"
_UNPARSABLE = "an ARS that may not parse: the adapter's and SpecValid's path (ADR 0050)"
_WIRE = "the wire form is the point: a status patch or a block as the live document holds it"

#: ``file:function:parameter`` of a controller function typed ``Manifest``/``dict[str, Any]``
#: /``Mapping[str, Any]``, and why it is not a model. ``manifest.py`` (the accessors) and the
#: pure ``*_rules.py`` modules are not checked.
EXPLAINED: dict[str, str] = {
    "adapter.py:scope_of_manifest:doc": _UNPARSABLE,
    "adapter.py:warn_unparsable:doc": _UNPARSABLE,
    "ars_children.py:converge_runner_sets:desired": _BUILT,
    "ars_children.py:create:want": _BUILT,
    "ars_children.py:runner_counts:ers": _WIRE + " (the live ERS, compared with the desired)",
    "ars_children.py:converge_one_runner_set:current": _WIRE + " (merge patch of the live ERS)",
    "ars_children.py:converge_one_runner_set:want": _BUILT,
    "ars_children.py:only_scale_set_id_changed:current_spec": _WIRE,
    "ars_children.py:only_scale_set_id_changed:want_spec": _BUILT,
    "ars_children.py:listener_differs:live": _WIRE,
    "ars_children.py:listener_differs:want": _BUILT,
    "ars_children.py:converge_listener:want": _BUILT,
    "ars_spec.py:set_spec_condition:doc": _UNPARSABLE,
    "ars_spec.py:refuse_invalid:doc": _UNPARSABLE,
    "ars_spec.py:delete_for_version:doc": _UNPARSABLE,
    "ars_spec.py:ars_unparsable:doc": _UNPARSABLE,
    "conditions.py:conditions_of:doc": _UNPARSABLE,
    "conditions.py:condition_of:doc": _UNPARSABLE,
    "listener.py:_live_or_create:want": _BUILT,
    "listener.py:_server_root_ca:spec": _WIRE,
    "listener.py:_ensure_metadata_object:want": _BUILT,
    "listener.py:_ensure_secret:want": _BUILT,
    "listener.py:_ensure_pod:want": _BUILT,
    "orphans.py:_parsed:docs": "the cache's documents, parsed here once per scan",
    "base.py:warn:involved": "an Event's involved object, of any kind (a runner's or a set's "
    "document): only its apiVersion, kind and metadata are read, by build_event",
    "runner_set.py:_create_runners:source": _BUILT,
    "runner_set.py:_create_named:template": _BUILT,
}

_DICT_TYPED = re.compile(r"\bManifest\b|dict\[str, Any\]|Mapping\[str, Any\]")


def _controller_files() -> list[Path]:
    return sorted(p for p in CONTROLLERS.glob("*.py") if p.name != "__init__.py")


def test_the_context_is_frozen() -> None:
    """The reconciler's and the registrar's alike (ADR 0095)."""
    for context in (Context, RegistrarContext):
        assert dataclasses.is_dataclass(context)
        assert context.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_nothing_sets_a_context_field_after_it_is_built() -> None:
    patched = re.compile(r"\b(ctx|context)\.\w+\s*=[^=]|setattr\(\s*(self\.)?(ctx|context)\b")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted([*RECONCILER.rglob("*.py"), *REGISTRAR.rglob("*.py")])
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if patched.search(line)
    ]
    assert not found, f"Context fields set after construction (pass them to it): {found}"


def test_dict_walks_in_the_controllers_only_go_down() -> None:
    over = {}
    for path in _controller_files():
        count = path.read_text().count('.get("')
        ceiling = GET_CEILINGS.get(path.name, 0)
        if count > ceiling:
            over[path.name] = (count, ceiling)
    assert not over, (
        f"more dict walks than allowed (count, ceiling): {over}; read the models' attributes "
        "instead (ADR 0071)"
    )


def test_the_ceilings_name_existing_files() -> None:
    names = {p.name for p in _controller_files()}
    assert set(GET_CEILINGS) <= names, set(GET_CEILINGS) - names


def _dict_typed_parameters() -> set[str]:
    found = set()
    for path in _controller_files():
        if path.name.endswith("_rules.py") or path.name == "manifest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.annotation is not None and _DICT_TYPED.search(ast.unparse(arg.annotation)):
                    found.add(f"{path.name}:{node.name}:{arg.arg}")
    return found


def test_dict_typed_controller_parameters_are_explained() -> None:
    unexplained = _dict_typed_parameters() - set(EXPLAINED)
    assert not unexplained, (
        f"controller functions taking a dict-typed manifest: {sorted(unexplained)}; take the "
        "object's model (arcflow.common.models), or add the reason to EXPLAINED"
    )


def test_every_explanation_is_still_needed() -> None:
    stale = set(EXPLAINED) - _dict_typed_parameters()
    assert not stale, f"EXPLAINED names parameters that are typed now: {sorted(stale)}"
