"""Write docs/asyncapi.json from the event models and the services' declared specs.

Run: ``.venv/bin/python scripts/generate_asyncapi.py``.

``--check`` exits 1 when the file is out of date instead of writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arcflow.common.events.asyncapi import render_asyncapi_json
from arcflow.common.nats.jetstream import ConsumerSpec
from arcflow.common.service.endpoints import RpcEndpoint

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "asyncapi.json"


def spec_consumers() -> list[ConsumerSpec]:
    """Every durable consumer the watcher, registrar and reconciler specs subscribe with."""
    from arcflow.reconciler.service import SERVICE as RECONCILER
    from arcflow.registrar.service import SERVICE as REGISTRAR
    from arcflow.watcher.service import SERVICE as WATCHER

    specs = (WATCHER, REGISTRAR, RECONCILER)
    return [s.consumer for spec in specs for s in spec.subscriptions]


def spec_rpc() -> list[tuple[str, RpcEndpoint]]:
    """Every RPC endpoint a service spec declares, with the service that serves it."""
    from arcflow.listener.service import SERVICE as LISTENER
    from arcflow.reconciler.service import SERVICE as RECONCILER
    from arcflow.registrar.service import SERVICE as REGISTRAR
    from arcflow.watcher.service import SERVICE as WATCHER

    specs = (WATCHER, REGISTRAR, RECONCILER, LISTENER)
    return [(spec.name, endpoint) for spec in specs for endpoint in spec.rpc]


def render() -> str:
    """docs/asyncapi.json as it should be."""
    return render_asyncapi_json(spec_consumers(), spec_rpc())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    current = args.output.read_text() if args.output.exists() else None
    if args.check:
        if current != text:
            print(
                f"{args.output} is out of date: run scripts/generate_asyncapi.py", file=sys.stderr
            )
            return 1
        return 0
    if current != text:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
