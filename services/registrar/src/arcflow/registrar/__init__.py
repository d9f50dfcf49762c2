"""arcflow registrar: a GitHub scale set per variant (``planning``, ``service``, ``rpc_server``)."""
