"""Benchmark: the JetStream event rate of ``benchmarks/scale.py`` (100 ARS x 10 variants).

Not a test. Runs ``scale.py``'s runs unchanged and, beside each, samples the stack's
nats-server at the end of each run: every stored message's store time and subject. Reports, per
stream, per durable consumer (the messages its filter subject matches) and for all streams
together, the most messages stored within any 1 s and within any 10 s; results in
``benchmarks/results/scale-event-rate.json``. The services' consume path must keep up with
these rates (docs/benchmarks/service-skeleton.md).

    .venv/bin/python benchmarks/scale_event_rate.py --ars 100 --variants 10 --runs 1 --idle 5
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _stack
import nats
import nats.errors
import scale

RUNS: list[dict[str, Any]] = []


def _matches(pattern: str, subject: str) -> bool:
    want, got = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(got) > i
        if i >= len(got) or (token != "*" and token != got[i]):
            return False
    return len(want) == len(got)


def _peak(stamps: list[float], window: float) -> int:
    """The most messages stored within any ``window`` seconds."""
    best, j = 0, 0
    for i, t in enumerate(stamps):
        while t - stamps[j] > window:
            j += 1
        best = max(best, i - j + 1)
    return best


async def _read_all(url: str) -> dict[str, Any]:
    """Every stored message's stream, subject and store time, then the peaks per stream, per
    durable consumer (its filter subject) and for all streams together."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    found: dict[str, list[tuple[float, str]]] = {}
    filters: dict[str, tuple[str, str]] = {}
    try:
        for info in await js.streams_info():
            name = info.config.name
            for consumer in await js.consumers_info(name):
                if consumer.config.durable_name:
                    filters[consumer.config.durable_name] = (
                        name,
                        consumer.config.filter_subject or ">",
                    )
            rows: list[tuple[float, str]] = []
            sub = await js.subscribe(">", stream=name, ordered_consumer=True)
            want = int(info.state.messages or 0)
            while len(rows) < want:
                try:
                    msg = await sub.next_msg(timeout=5)
                except nats.errors.TimeoutError:
                    break
                rows.append((msg.metadata.timestamp.timestamp(), msg.subject))
            await sub.unsubscribe()
            found[name] = sorted(rows)
    finally:
        await nc.close()
    out: dict[str, Any] = {}

    def row(stamps: list[float]) -> dict[str, Any]:
        return {
            "messages": len(stamps),
            "peak_in_1s": _peak(stamps, 1.0),
            "peak_per_second_over_10s": round(_peak(stamps, 10.0) / 10.0, 1),
            "span_seconds": round(stamps[-1] - stamps[0], 1) if stamps else 0.0,
        }

    for name, rows in found.items():
        if rows:
            out[f"stream {name}"] = row([t for t, _ in rows])
    for durable, (stream, pattern) in sorted(filters.items()):
        stamps = [t for t, subject in found.get(stream, []) if _matches(pattern, subject)]
        out[f"consumer {durable}"] = row(stamps)
    out["all streams"] = row(sorted(t for rows in found.values() for t, _ in rows))
    return out


_original_start = _stack.Stack.start


async def _start_and_record(self: Any) -> None:
    await _original_start(self)
    url = self.nats.url

    async def record() -> None:
        RUNS.append(await _read_all(url))

    self._exit.push_async_callback(record)  # runs first at exit, while nats-server is up


def main() -> int:
    _stack.Stack.start = _start_and_record  # type: ignore[method-assign]
    sys.argv = [sys.argv[0], *sys.argv[1:], "--label", "event-rate"]
    code = asyncio.run(scale.main())
    for i, run in enumerate(RUNS):
        print(f"run {i + 1}:")
        for key, row in run.items():
            if row["messages"]:
                print(
                    f"  {key:36} {row['messages']:6} messages over {row['span_seconds']:6} s;"
                    f" peak {row['peak_in_1s']:5} in 1 s,"
                    f" {row['peak_per_second_over_10s']:6}/s over 10 s"
                )
    out = Path("benchmarks/results/scale-event-rate.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"machine": _stack.machine(), "runs": RUNS},
            indent=2,
        )
        + "\n"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
