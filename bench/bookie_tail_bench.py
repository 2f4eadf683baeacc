"""Where the bookie's p99 comes from: latency histograms of 1 KiB adds at 64 outstanding on one
bookie, from two load generators, for bookie variants started side by side in the same run.

Load generators:
- "lean": `bench.lean_load`, a pipelined closed loop on a plain socket with pre-built frames
  and fixed-header responses, compiled (under 1 µs of CPU per add), so the bookie is what is
  measured.
- "client": the asyncio `BookieClient` closed loop of `bench.bookie_bench` (package + frame per
  add, a coroutine per slot), i.e. what a Python caller of the bookie sees.

Bookie variants (`--variants`, see `VARIANTS`): "default" (the bookie as shipped), the other
`--python-gc` modes, no checkpoint during the run (a 1 GiB write cache), a 16 MiB write cache
(smaller, more frequent checkpoints). Each variant is a fresh bookie on the
same etcd and disk; the variants are measured round-robin, `--rounds` times, so a change of
load hits all of them. A raw grouped pwrite+fdatasync loop (64 records of 1 KiB per sync) is
measured in every round as the reference.

    .venv/bin/python -m bench.bookie_tail_bench [--seconds 3] [--rounds 2]
        [--variants default,gc-cpython,...] [--generators lean,client]

About 15 s of start-up plus 2 x 3 s per variant and round, plus 3 s of raw loop per round
(the defaults: ~30 s; all six variants, two rounds: ~100 s).
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import uvloop

from bench.bookie_bench import (
    LEAN_MAX_RATE,
    MASTER_KEY,
    PAYLOAD,
    Result,
    bookie_level,
    raw_grouped,
    start_bookie,
    stop_bookie,
)
from bench.harness import REPO, cpu_seconds, machine
from bench.lean_load import build_frames, lean_run
from metastore.embedded import EmbeddedEtcd

OUTSTANDING = 64
BUCKETS_MS = (0.5, 1, 2, 5, 10, 20, 50, 100)

# name -> (bookie `-c` settings, extra bookie flags)
VARIANTS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "default": ({}, ()),  # as shipped: --python-gc freeze-lazy
    "gc-cpython": ({}, ("--python-gc", "default")),
    "gc-freeze": ({}, ("--python-gc", "freeze")),
    "gc-off": ({}, ("--python-gc", "off")),
    # No checkpoint during the run: a 1 GiB write cache is checkpointed at half full.
    "no-checkpoint": ({"dbStorage_writeCacheMaxSizeMb": "1024"}, ()),
    "cache-16": ({"dbStorage_writeCacheMaxSizeMb": "16"}, ()),
}


@dataclass(frozen=True)
class Run:
    variant: str
    generator: str
    adds: int
    seconds: float
    latencies_ms: list[float]
    bookie_cpu_s: float
    client_cpu_s: float

    @property
    def rate(self) -> float:
        return self.adds / self.seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def histogram(values_ms: list[float]) -> list[int]:
    """Counts per bucket: below each of BUCKETS_MS in turn, then the rest."""
    counts = [0] * (len(BUCKETS_MS) + 1)
    for value in values_ms:
        counts[bisect.bisect_right(BUCKETS_MS, value)] += 1
    return counts


def measure(variant: str, address: str, pid: int, generator: str, seconds: float,
            base: int, per_slot: int) -> Run:
    if generator == "lean":
        frames = build_frames(OUTSTANDING, per_slot, base, PAYLOAD, MASTER_KEY)
        cpu0, client0 = cpu_seconds(pid), time.process_time()
        adds, elapsed, latencies = lean_run(address, frames, seconds, base)
        del frames
    else:
        cpu0, client0 = cpu_seconds(pid), time.process_time()
        t0 = time.perf_counter()
        latencies = uvloop.run(_client_run(address, seconds, base))
        elapsed = time.perf_counter() - t0
        adds = len(latencies)
    return Run(variant, generator, adds, elapsed, latencies,
               cpu_seconds(pid) - cpu0, time.process_time() - client0)


async def _client_run(address: str, seconds: float, base: int) -> list[float]:
    latencies: list[float] = []
    await bookie_level(address, OUTSTANDING, seconds, base, latencies)
    return [value * 1e3 for value in latencies]


def run(seconds: float, rounds: int, variants: Sequence[str], generators: Sequence[str],
        per_slot: int) -> str:
    runs: list[Run] = []
    raws: list[Result] = []
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bookie-tail-", dir=REPO) as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        try:
            bookies = {name: start_bookie(workdir, name, etcd.url, *VARIANTS[name])
                       for name in variants}
            try:
                base = 10_000
                for _ in range(rounds):
                    loads.append(os.getloadavg()[0])
                    raws.append(raw_grouped(workdir, OUTSTANDING, seconds))
                    for name, (address, process) in bookies.items():
                        for generator in generators:
                            runs.append(measure(name, address, process.pid, generator,
                                                seconds, base, per_slot))
                            base += 1000
                loads.append(os.getloadavg()[0])
            finally:
                for _, process in bookies.values():
                    stop_bookie(process)
        finally:
            etcd.stop()
    return report(runs, raws, loads, seconds)


def report(runs: list[Run], raws: list[Result], loads: list[float], seconds: float) -> str:
    lines = [
        f"Machine: {machine()}; load average (1 min) per round: "
        + ", ".join(f"{value:.1f}" for value in loads),
        "Raw grouped pwrite+fdatasync, 64 x 1 KiB per sync, per round: "
        + ", ".join(f"{raw.rate:,.0f}/s (p99 {raw.p99_ms:.2f} ms)" for raw in raws),
        "",
        "| variant | generator | adds/s | / raw | p50 / p99 / p99.9 / max ms "
        "| bookie CPU µs/add | client CPU µs/add | histogram ms: "
        + " ".join(f"<{b:g}" for b in BUCKETS_MS) + f" >={BUCKETS_MS[-1]:g} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    per_round = len(runs) // max(1, len(raws))
    for index, r in enumerate(runs):
        raw = raws[min(index // max(1, per_round), len(raws) - 1)]
        lines.append(
            f"| {r.variant} | {r.generator} | {r.rate:,.0f} | {r.rate / raw.rate:.0%} "
            f"| {r.pct(0.5):.2f} / {r.pct(0.99):.2f} / {r.pct(0.999):.2f} "
            f"/ {max(r.latencies_ms, default=0):.1f} "
            f"| {r.bookie_cpu_s / r.adds * 1e6:.1f} | {r.client_cpu_s / r.adds * 1e6:.1f} "
            f"| {' '.join(str(c) for c in histogram(r.latencies_ms))} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bookie_tail_bench")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default="default,gc-cpython",
                        help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--generators", default="lean,client")
    parser.add_argument("--per-slot", type=int, default=None,
                        help="pre-built frames per slot for the lean generator (default: "
                             f"enough for {LEAN_MAX_RATE:,} adds/s over --seconds)")
    args = parser.parse_args(argv)
    per_slot = args.per_slot or math.ceil(args.seconds * LEAN_MAX_RATE / OUTSTANDING)
    print(run(args.seconds, args.rounds, args.variants.split(","),
              args.generators.split(","), per_slot))


if __name__ == "__main__":
    main()
