"""The cost of the change history on the rack write, against the history off, in one run.

    python -m bench.history_bench [--seconds 5] [--rounds 2] [--bookies 32 1000]

Two servers on the same etcd: one with `changeHistoryEnabled=false`, one with the default
(every write recorded in its own transaction). `set-bookie-rack` (the rack-write fast path,
the benchmark of `bench.api_bench`) is measured on each at 8 and 32 concurrent clients,
alternating off/on for `--rounds` rounds so that load from other processes on a shared machine
falls on both. Before every point etcd is left to settle (a server may still be working off
requests wrk sent), the rack map is reset, the history emptied and etcd compacted. The report
gives requests/s and p50/p99 for each and the ratio on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_bench import compact_etcd, etcd_client, reset_rack_map, set_bookie_rack
from bench.harness import BenchServer, machine, off_on_level
from metastore import paths
from metastore.embedded import EmbeddedEtcd

CONCURRENCY = (8, 32)


async def settle(etcd: EmbeddedEtcd, quiet: float = 0.5, bound: float = 120.0) -> None:
    """Wait until etcd's revision stops moving: a server still working off requests that wrk
    sent before it stopped would otherwise write over the next point's reset rack map."""
    async with etcd_client(etcd) as client:
        deadline = time.monotonic() + bound
        last = -1
        while time.monotonic() < deadline:
            revision = (await client.get_prefix(b"/bench/settle/")).header.revision
            if revision == last:
                return
            last = revision
            await asyncio.sleep(quiet)
        raise AssertionError("etcd kept changing after the load stopped")


async def empty_history(etcd: EmbeddedEtcd) -> None:
    async with etcd_client(etcd) as client:
        await client.delete_prefix((paths.CHANGE_HISTORY + "/").encode())


def run(seconds: float, rounds: int, workloads: tuple[int, ...]) -> dict[str, Any]:
    samples: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        try:
            with (
                BenchServer(etcd, workdir, {"changeHistoryEnabled": "false"}) as plain,
                BenchServer(etcd, workdir, {"changeHistoryEnabled": "true"}) as recorded,
            ):
                for bookies in workloads:
                    for _ in range(rounds):
                        for clients in CONCURRENCY:
                            for mode, url in (("off", plain.url), ("on", recorded.url)):
                                asyncio.run(settle(etcd))
                                reset_rack_map(plain.url, etcd, bookies)
                                asyncio.run(empty_history(etcd))
                                asyncio.run(compact_etcd(etcd))
                                measured = set_bookie_rack(url, clients, seconds, bookies)
                                samples.setdefault((bookies, mode, clients), []).append(measured)
        finally:
            etcd.stop()
    levels = []
    for bookies in workloads:
        for clients in CONCURRENCY:
            off, on = samples[(bookies, "off", clients)], samples[(bookies, "on", clients)]
            levels.append({"bookies": bookies, "clients": clients, **off_on_level(off, on)})
    first = samples[(workloads[0], "off", CONCURRENCY[0])][0]
    return {
        "machine": machine(),
        "client": first["client"],
        "seconds_per_point": seconds,
        "rounds": rounds,
        "levels": levels,
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        f"machine: {results['machine']}; HTTP load from {results['client']}; "
        f"{results['rounds']} rounds of {results['seconds_per_point']:g} s per point",
        "",
        "| bookies | clients | history off req/s | p50 ms | p99 ms | history on req/s | p50 ms "
        "| p99 ms | on/off |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in results["levels"]:
        off, on = level["off"], level["on"]
        lines.append(
            f"| {level['bookies']} | {level['clients']} | {off['rps']:.0f} | {off['p50_ms']:.1f} "
            f"| {off['p99_ms']:.1f} | {on['rps']:.0f} | {on['p50_ms']:.1f} | {on['p99_ms']:.1f} "
            f"| {level['ratio']:.0%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bookies", type=int, nargs="+", default=[32, 1000])
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results = run(args.seconds, args.rounds, tuple(args.bookies))
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
