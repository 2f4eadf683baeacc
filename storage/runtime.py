"""CPython runtime settings for the storage processes (bookies, and the service that runs the
ledger client): the cyclic garbage collector, and handing the GIL to the event loop.

Measured (bench.bookie_tail_bench, bench.ledger_tail_bench; BENCHMARKS.md): with CPython's
defaults a full (oldest-generation) collection walks every object of the imported modules
(grpc, aetcd, protobuf, lmdb, ...) and stalls the event loop for 12-35 ms in a bookie and for
70-80 ms in the ledger client's process, several times per second under load; and the young
collection every 700 allocations promotes the in-flight adds' request objects and callbacks,
which is what feeds those full collections. Frozen start-up objects are skipped by every
collection; a 20,000-object young generation lets the in-flight adds die young (they are freed
by reference counting, not by the collector). Reference cycles are still collected.
"""

from __future__ import annotations

import gc
import time

GC_MODES = ("default", "freeze", "freeze-lazy", "off")
GC_DEFAULT = "freeze-lazy"
YOUNG_GENERATION = 20_000


def set_gc(mode: str) -> None:
    """`default`: CPython's settings; `freeze`: collect, then leave everything alive now out
    of every later collection; `freeze-lazy`: freeze, and a young generation of
    YOUNG_GENERATION objects instead of 700; `off`: no cyclic collection (bench experiments
    only: cycles would leak). Call once start-up is done (modules imported)."""
    if mode not in GC_MODES:
        raise ValueError(f"unknown GC mode {mode!r}: one of {', '.join(GC_MODES)}")
    gc.enable()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    if mode in ("freeze", "freeze-lazy"):
        gc.collect()
        gc.freeze()
    if mode == "freeze-lazy":
        gc.set_threshold(YOUNG_GENERATION, 10, 10)
    elif mode == "off":
        gc.disable()


def hand_over_gil() -> None:
    """Let a thread waiting for the GIL (the event loop) run now: `time.sleep(0)` releases it,
    and CPython hands it to a waiting thread before taking it back.

    A background thread doing long stretches of Python work (a bookie's checkpoint) calls this
    every ~100 µs of it. Without it the event loop, which gives the GIL up at each of its
    system calls (epoll, recv, send), waits up to the switch interval (1 ms in a bookie) to get
    it back each time, several times per loop iteration (the convoy effect). Measured on a
    bookie at 64 outstanding adds: p99 5-6 ms without, 3.0 ms with (BENCHMARKS.md)."""
    time.sleep(0)
