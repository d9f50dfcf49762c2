"""arcflow.cli."""
