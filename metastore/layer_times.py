"""Time spent in each layer of a request, for benchmarks (`bench/api_bench.py --layers`).

Off unless the environment variable `PULSAR_ISOLATION_LAYER_TIMES` names a file: then each
instrumented section adds its time to its layer's total, and the totals (seconds and
sections counted, by layer) are written to that file as JSON whenever the process receives
SIGUSR1 and when it exits. A section is timed in CPU time of the calling thread
(`time.thread_time`, so time the machine gives to other processes is not counted), except
waits on the store, which are wall-clock time. Off, a section costs one global lookup.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import time
from pathlib import Path
from types import FrameType

__all__ = ["ENV", "cpu_start", "cpu_stop", "enabled", "wall_start", "wall_stop"]

ENV = "PULSAR_ISOLATION_LAYER_TIMES"

_file = os.environ.get(ENV, "")
enabled = bool(_file)
_totals: dict[str, list[float]] = {}


def cpu_start() -> float:
    return time.thread_time() if enabled else 0.0


def cpu_stop(layer: str, started: float) -> None:
    if enabled:
        _add(layer, time.thread_time() - started)


def wall_start() -> float:
    return time.perf_counter() if enabled else 0.0


def wall_stop(layer: str, started: float) -> None:
    if enabled:
        _add(layer, time.perf_counter() - started)


def _add(layer: str, seconds: float) -> None:
    total = _totals.get(layer)
    if total is None:
        _totals[layer] = [seconds, 1]
    else:
        total[0] += seconds
        total[1] += 1


def _dump(*_: object) -> None:
    Path(_file).write_text(json.dumps({layer: {"seconds": s, "count": int(n)}
                                       for layer, (s, n) in _totals.items()}))


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    _dump()


if enabled:
    signal.signal(signal.SIGUSR1, _on_signal)
    atexit.register(_dump)
