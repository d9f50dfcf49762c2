"""arcflow.common: what every service shares. It imports no other arcflow package.

Pure (no I/O):
- ``constants``, ``naming``, ``github_url``: upstream's keys, names and config URL rules.
- ``models``: the four CRDs with ``runnerVariants``; ``effective_variants``.
- ``validation``: every problem of an AutoscalingRunnerSet, with its field path.
- ``hashing``, ``builders``, ``listener_config``: the exact objects the reconciler writes.
- ``events``, ``subjects``, ``scaleset_records``: the event catalog and its wire names.

Edges (I/O):
- ``nats``: settings, JetStream layout, publishing, the dead-lettering consumer, permissions.
- ``kube``: the Kubernetes layer (one client on httpx).
- ``actions``: the GitHub Actions scale-set client over httpx.
- ``rpc``: the registrar's request/reply contract and client.
- ``telemetry``, ``health``: logs with redaction, metrics, traces, health endpoints.
"""
