"""arcflow.devstack."""
