"""The podman way of the image tests skips only on the sandbox's known refusal of containers;
a broken image fails (issue 32, item 7). The messages are podman 4 with runc, as seen here."""

from __future__ import annotations

from deploy.tests.test_images import podman_refusal

RLIMITS = (
    "Error: runc: runc create failed: unable to start container process: error during container "
    "init: error setting rlimits for ready process: error setting rlimit type 7: operation not "
    "permitted: OCI permission denied"
)
HYBRID = "Error: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"
NO_ENTRYPOINT = (
    'Error: runc: runc create failed: unable to start container process: exec: "python": '
    "executable file not found in $PATH: OCI runtime attempted to invoke a command that was "
    "not found"
)


def test_the_runtimes_refusal_to_set_up_a_container_skips() -> None:
    for stderr in (RLIMITS, HYBRID):
        reason = podman_refusal(126, stderr)
        assert reason is not None
        assert reason.startswith("this sandbox refuses to run containers")


def test_a_broken_image_or_any_other_failure_does_not() -> None:
    assert podman_refusal(127, NO_ENTRYPOINT) is None  # the image has no python
    assert podman_refusal(126, NO_ENTRYPOINT) is None
    assert podman_refusal(3, "") is None  # python ran and failed: the image's fault
    assert podman_refusal(125, "Error: localhost/arcflow/watcher:0.2.0: image not known") is None
    assert podman_refusal(1, RLIMITS) is None  # the command's own exit code
