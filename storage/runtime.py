"""CPython runtime settings for the storage processes (bookies, and the service that runs the
ledger client): the cyclic garbage collector.

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
