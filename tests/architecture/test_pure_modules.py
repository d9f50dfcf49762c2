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


def _package_root(module: str) -> Path:
    parts = module.split(".")
    return REPO / ("services" if parts[1] in SERVICES else "libs") / parts[1]


def test_every_pure_module_has_a_unit_test_file_of_its_name() -> None:
    """``tests/unit/test_<name>.py``; a pure package (``models``, ``builders``) may split its
    tests into ``test_<name>_<part>.py`` files."""
    missing = []
    for module in _pure_modules():
        name = module.split(".")[-1]
        unit = _package_root(module) / "tests" / "unit"
        if not (unit / f"test_{name}.py").is_file() and not list(unit.glob(f"test_{name}_*.py")):
            missing.append((unit / f"test_{name}.py").relative_to(REPO).as_posix())
    assert not missing, f"pure modules without their unit test file: {missing}"


def test_unit_tests_live_in_a_folder_named_unit_in_every_package() -> None:
    packages = [REPO / "services" / s for s in SERVICES] + sorted(
        p for p in (REPO / "libs").iterdir() if (p / "pyproject.toml").is_file()
    )
    for package in packages:
        tests = package / "tests"
        assert (tests / "unit").is_dir(), f"{tests} has no unit/ folder"
        assert list((tests / "unit").glob("test_*.py")), f"{tests / 'unit'} holds no tests"
