"""arcflow.common."""
