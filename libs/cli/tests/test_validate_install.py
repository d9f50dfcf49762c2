"""``arcflow validate`` answers the same however arcflow was installed: what it imports for the
pod template check is a runtime dependency of ``arcflow-cli``, so ``scripts/dev.sh``'s install
(``uv sync --no-dev``) has it as much as ``scripts/test.sh``'s does."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sysconfig
import tomllib
from pathlib import Path

import arcflow.cli.manifest_checks as manifest_checks

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "01-single-scale-set.yaml"


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _lazy_imports(module: Path) -> set[str]:
    """Top-level names of the modules imported inside functions (the optional-looking ones)."""
    found: set[str] = set()
    for func in ast.walk(ast.parse(module.read_text())):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_module_the_schema_check_imports_is_a_runtime_dependency_of_the_cli() -> None:
    imported = _lazy_imports(Path(manifest_checks.__file__))
    assert {"jsonschema", "kubernetes_validate", "referencing"} <= imported
    distributions = importlib.metadata.packages_distributions()
    required = {_name(r) for r in importlib.metadata.requires("arcflow-cli") or []}
    for module in sorted(imported - {"arcflow"}):
        names = {_name(d) for d in distributions.get(module, [])}
        assert names & required, f"{module} ({names}) is not a dependency of arcflow-cli"


def test_the_lock_gives_them_to_a_no_dev_install() -> None:
    """What ``uv sync --frozen --no-dev`` installs: arcflow-cli's own dependencies in uv.lock."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    packages = {p["name"]: p for p in lock["package"]}
    cli_deps = {d["name"] for d in packages["arcflow-cli"]["dependencies"]}
    assert {"kubernetes-validate", "jsonschema", "referencing"} <= cli_deps
    dev = {d["name"] for d in packages["arcflow"].get("dev-dependencies", {}).get("dev", [])}
    assert "pytest" in dev  # the group was read
    assert not dev & {"kubernetes-validate", "jsonschema"}, "pinned twice: dev group and CLI"


def test_the_installed_command_refuses_a_pod_template_typo_without_a_note(tmp_path: Path) -> None:
    """The console script a user types (not CliRunner): exit 1, a suggestion, no "not checked"."""
    broken = tmp_path / "ars.yaml"
    text = EXAMPLE.read_text()
    assert "          image:" in text
    broken.write_text(text.replace("          image:", "          imagee:", 1))
    arcflow = Path(sysconfig.get_path("scripts")) / "arcflow"
    done = subprocess.run(
        [str(arcflow), "validate", str(broken)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "spec.template.spec.containers[0].imagee: unknown field; did you mean 'image'?"
        in done.stdout
    )
    assert "note:" not in done.stderr
