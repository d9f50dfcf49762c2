"""A real one-node Kubernetes cluster in a network namespace of its own (docs/node.md)."""

from arcflow.devstack.node.cluster import DIR_ENV, Node, NodeError, locate_parts

__all__ = ["DIR_ENV", "Node", "NodeError", "locate_parts"]
