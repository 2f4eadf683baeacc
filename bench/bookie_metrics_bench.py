"""What a bookie's statistics cost on the add path: two bookie processes in the same run, one
with `enableStatistics=false` (baseline), one with statistics on and its Prometheus port
serving, driven by the same closed loop as `bench.bookie_bench` (1 KiB adds, N outstanding),
the two measured alternately (each first in every other round), each level twice, so load
changes on a shared machine hit both.

    .venv/bin/python -m bench.bookie_metrics_bench [--seconds 3]

Reports adds/s and the bookie's CPU µs per add for each, and the ratios (on / off); CPU per
add is the steadier figure on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx
import uvloop

from bench.bookie_bench import bookie_level, start_bookie
from bench.harness import REPO, cpu_seconds, machine
from metastore.embedded import EmbeddedEtcd, free_port
from storage.bookie.metrics import BookieMetrics

LEVELS = (1, 16, 256)
ROUNDS = 2


def recording_cost_us(count: int = 5_000, repeats: int = 60) -> float:
    """µs the add path pays for statistics per add: what `RequestHandler._add` adds (a clock
    read, a closure) plus `BookieMetrics.added` (a clock read, a bucket, two additions); the
    best of `repeats` runs of each path (as `timeit`), so preemption on a busy machine does
    not count."""
    metrics = BookieMetrics()
    sink: list[int] = []

    def send(code: int) -> None:
        sink.append(code)

    def with_stats() -> float:
        t0 = time.perf_counter()
        for _ in range(count):
            started, size = time.perf_counter(), 1024

            def reply(code: int, started: float = started, size: int = size) -> None:
                metrics.added(started, code, size)
                send(code)

            reply(0)
        return time.perf_counter() - t0

    def without() -> float:
        t0 = time.perf_counter()
        for _ in range(count):
            (lambda code: send(code))(0)
        return time.perf_counter() - t0

    best_with = min(with_stats() for _ in range(repeats))
    best_without = min(without() for _ in range(repeats))
    sink.clear()
    return (best_with - best_without) / count * 1e6


def run(seconds: float = 3.0) -> str:
    with tempfile.TemporaryDirectory(prefix="bookie-metrics-bench-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        metrics_port = free_port()
        bookies = {
            "off": start_bookie(workdir, "off", etcd.url, {"enableStatistics": "false"}),
            "on": start_bookie(workdir, "on", etcd.url,
                               {"prometheusStatsHttpPort": str(metrics_port)}),
        }
        totals = {(name, level): [0.0, 0.0, 0.0] for name in bookies for level in LEVELS}
        try:
            base = 1000
            for round_ in range(ROUNDS):
                for level in LEVELS:
                    order = list(bookies.items())  # each goes first in every other round
                    for name, (address, process) in order[::-1] if round_ % 2 else order:
                        base += 1000
                        cpu0 = cpu_seconds(process.pid)
                        result = uvloop.run(bookie_level(address, level, seconds, base))
                        total = totals[(name, level)]
                        total[0] += result.rate * seconds  # adds
                        total[1] += seconds
                        total[2] += cpu_seconds(process.pid) - cpu0
            scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
            t0 = time.perf_counter()
            for _ in range(20):
                httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
            scrape_ms = (time.perf_counter() - t0) / 20 * 1000
        finally:
            for _, process in bookies.values():
                process.terminate()
                process.wait(timeout=30)
            etcd.stop()
    counted = next(line for line in scraped.splitlines()
                   if line.startswith('bookkeeper_server_ADD_ENTRY_count{success="true"}'))
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end; "
        f"{ROUNDS} alternating rounds of {seconds:g} s per level and bookie",
        "",
        "| outstanding | adds/s off | adds/s on | on / off | CPU µs/add off | CPU µs/add on "
        "| CPU on / off |",
        "|---|---|---|---|---|---|---|",
    ]
    for level in LEVELS:
        off_adds, off_s, off_cpu = totals[("off", level)]
        on_adds, on_s, on_cpu = totals[("on", level)]
        off_rate, on_rate = off_adds / off_s, on_adds / on_s
        off_us, on_us = off_cpu / off_adds * 1e6, on_cpu / on_adds * 1e6
        lines.append(f"| {level} | {off_rate:,.0f} | {on_rate:,.0f} | {on_rate / off_rate:.2f} "
                     f"| {off_us:.1f} | {on_us:.1f} | {on_us / off_us:.2f} |")
    lines += ["", f"Recording cost in-process: {recording_cost_us():.2f} µs per add (best of 60 "
              "runs of 5,000, against the same reply path without statistics).",
              "", f"Statistics bookie's own count after the run: `{counted}`; a scrape takes "
              f"{scrape_ms:.1f} ms (mean of 20)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bookie_metrics_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(run(args.seconds))


if __name__ == "__main__":
    main()
