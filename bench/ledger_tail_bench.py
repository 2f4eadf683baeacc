"""Where the ledger's p99 comes from: latency histograms of a ledger E=3/Qw=3/Qa=2 on three
bookie processes, 1 KiB adds at 64 outstanding (the closed loop of `bench.ledger_bench`), with
the client process's cyclic GC as CPython sets it and frozen (`--client-gc`), round-robin in
the same run, plus the client's GC pauses (gc.callbacks) and the CPU per add of the client
and of the three bookies together.

    .venv/bin/python -m bench.ledger_tail_bench [--seconds 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from bench.bookie_tail_bench import BUCKETS_MS, histogram
from bench.harness import REPO, cpu_seconds, machine, percentile
from bench.ledger_bench import ledger_level, start_bookies
from metastore.embedded import EmbeddedEtcd
from storage.runtime import set_gc

OUTSTANDING = 64
CLIENT_GC = ("cpython", "freeze-lazy")


@dataclass(frozen=True)
class Row:
    client_gc: str
    adds: int
    seconds: float
    latencies_ms: list[float]
    client_cpu_us: float
    bookies_cpu_us: float
    gc_pauses: dict[int, list[float]]  # generation -> pause durations (ms)
    load: float


class GcPauses:
    """Every collection's pause in this process, by generation, while entered."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append((time.perf_counter() - self._started) * 1e3)

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)


def set_client_gc(mode: str) -> None:
    set_gc("default" if mode == "cpython" else mode)


def run(seconds: float, rounds: int) -> str:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ledger-tail-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        processes: list[subprocess.Popen[bytes]] = []
        try:
            start_bookies(workdir, etcd.url, processes)
            for _ in range(rounds):
                for mode in CLIENT_GC:
                    set_client_gc(mode)
                    latencies: list[float] = []
                    bookies0 = sum(cpu_seconds(p.pid) for p in processes)
                    client0 = time.process_time()
                    started = time.perf_counter()
                    with GcPauses() as pauses:
                        uvloop.run(ledger_level(etcd.url, OUTSTANDING, seconds, latencies))
                    elapsed = time.perf_counter() - started
                    adds = len(latencies)
                    rows.append(Row(
                        mode, adds, elapsed, [value * 1e3 for value in latencies],
                        (time.process_time() - client0) / adds * 1e6,
                        (sum(cpu_seconds(p.pid) for p in processes) - bookies0) / adds * 1e6,
                        pauses.pauses, os.getloadavg()[0],
                    ))  # fmt: skip
        finally:
            set_client_gc("cpython")
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
            etcd.stop()
    lines = [
        f"Machine: {machine()}; ledger E=3/Qw=3/Qa=2, {OUTSTANDING} outstanding, 1 KiB adds, "
        f"{seconds:g} s per row (rate over the whole row, setup included)",
        "",
        "| client GC | load | adds/s | p50 / p99 / p99.9 / max ms | client CPU µs/add "
        "| 3 bookies' CPU µs/add | client GC pauses: gen2 count, max ms; all gens total ms "
        "| histogram ms: " + " ".join(f"<{b:g}" for b in BUCKETS_MS)
        + f" >={BUCKETS_MS[-1]:g} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        values = row.latencies_ms
        gen2 = row.gc_pauses[2]
        total = sum(sum(pauses) for pauses in row.gc_pauses.values())
        lines.append(
            f"| {row.client_gc} | {row.load:.1f} | {row.adds / row.seconds:,.0f} "
            f"| {percentile(values, 50):.2f} / {percentile(values, 99):.2f} "
            f"/ {percentile(values, 99.9):.2f} / {max(values, default=0):.1f} "
            f"| {row.client_cpu_us:.0f} | {row.bookies_cpu_us:.0f} "
            f"| {len(gen2)}, {max(gen2, default=0):.1f}; {total:.0f} "
            f"| {' '.join(str(c) for c in histogram(values))} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_tail_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(run(args.seconds, args.rounds))


if __name__ == "__main__":
    main()
