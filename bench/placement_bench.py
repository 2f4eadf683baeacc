"""Placement micro-benchmark: new_ensemble calls per CPU-second on one core.

    python -m bench.placement_bench [--seconds 1.0] [--json bench/results/placement.json]

Clusters of 100, 1,000 and 10,000 bookies (20 per rack); E=3/Qw=3 and E=5/Qw=3; with
no isolation and with a namespace whose primary group holds half the bookies. The
topology is built once per cluster (as the service does) and reused for every call.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import random
import time

from placement import AffinityGroups, EnsembleRequest, PlacementConfig, Topology, new_ensemble

SIZES = (100, 1_000, 10_000)
SHAPES = ((3, 3, 2), (5, 3, 2))
PER_RACK = 20


def build(n: int) -> Topology:
    half = n // 2
    doc = {
        "iso": {f"bk{i}:3181": {"rack": f"/rack{i // PER_RACK}"} for i in range(half)},
        "other": {f"bk{i}:3181": {"rack": f"/rack{i // PER_RACK}"} for i in range(half, n)},
    }
    return Topology.build(doc, [f"bk{i}:3181" for i in range(n)])


def measure(
    topo: Topology, req: EnsembleRequest, groups: AffinityGroups | None, seconds: float
) -> float:
    cfg = PlacementConfig()
    rng = random.Random(42)
    new_ensemble(topo, req, cfg, rng, affinity=groups)  # warm the memoised views
    calls = 0
    start = time.process_time()  # CPU time of this process: one core, robust to a busy host
    deadline = start + seconds
    while True:
        for _ in range(200):
            new_ensemble(topo, req, cfg, rng, affinity=groups)
        calls += 200
        now = time.process_time()
        if now >= deadline:
            return calls / (now - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--json", type=pathlib.Path, help="write results here")
    args = parser.parse_args(argv)
    rows = []
    for n in SIZES:
        t0 = time.perf_counter()
        topo = build(n)
        build_ms = (time.perf_counter() - t0) * 1000
        for e, w, a in SHAPES:
            for label, groups in (("none", None), ("group", AffinityGroups(("iso",)))):
                rate = measure(topo, EnsembleRequest(e, w, a), groups, args.seconds)
                rows.append(
                    {
                        "bookies": n,
                        "E": e,
                        "Qw": w,
                        "isolation": label,
                        "calls_per_s": round(rate),
                        "build_ms": round(build_ms, 1),
                    }
                )
    print(
        f"{'bookies':>8} {'E/Qw':>5} {'isolation':>9} {'calls/s':>9} {'us/call':>8} "
        f"{'vs 100':>7} {'build ms':>9}"
    )
    base = {(r["E"], r["isolation"]): r["calls_per_s"] for r in rows if r["bookies"] == 100}
    for r in rows:
        ratio = base[(r["E"], r["isolation"])] / r["calls_per_s"]
        print(
            f"{r['bookies']:>8} {r['E']}/{r['Qw']:<3} {r['isolation']:>9} "
            f"{r['calls_per_s']:>9} {1e6 / r['calls_per_s']:>8.1f} {ratio:>6.2f}x "
            f"{r['build_ms']:>9}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"python": platform.python_version(), "rows": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
