"""Root conftest: registers the shared fixture modules for every test directory."""

pytest_plugins = [
    "tests.fixtures.nats",
    "tests.fixtures.kube",
    "tests.fixtures.actions",
]
