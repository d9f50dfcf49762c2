"""The pure cores are declared once, in ``.importlinter``'s ``pure-*`` contracts (no I/O imports,
checked by lint-imports), and each one has a unit test file of its own name in its package's
``tests/unit/`` folder, so a reader finds a rule's tests by the rule's name."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("watcher", "registrar", "reconciler", "listener")


def _pure_modules() -> list[str]:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    modules: list[str] = []
    for section in config.sections():
        if section.startswith("importlinter:contract:pure-"):
            modules += config[section]["source_modules"].split()
    return modules


def _source_file(module: str) -> Path:
    parts = module.split(".")
    root = REPO / "services" / parts[1] if parts[1] in SERVICES else REPO / "libs" / parts[1]
    return root / "src" / Path(*parts).with_suffix(".py")


def test_the_pure_contracts_name_existing_modules() -> None:
    modules = _pure_modules()
    assert len(modules) >= 10
    missing = [
        m
        for m in modules
        if not _source_file(m).is_file() and not _source_file(m).with_suffix("").is_dir()
    ]
    assert not missing, f".importlinter names modules that do not exist: {missing}"


def test_every_pure_service_module_has_a_unit_test_file_of_its_name() -> None:
    missing = []
    for module in _pure_modules():
        parts = module.split(".")
        if parts[1] not in SERVICES:
            continue
        wanted = REPO / "services" / parts[1] / "tests" / "unit" / f"test_{parts[-1]}.py"
        if not wanted.is_file():
            missing.append(wanted.relative_to(REPO).as_posix())
    assert not missing, f"pure modules without their unit test file: {missing}"


def test_unit_tests_live_in_a_folder_named_unit_in_every_service() -> None:
    for service in SERVICES:
        tests = REPO / "services" / service / "tests"
        assert (tests / "unit").is_dir(), f"{tests} has no unit/ folder"
