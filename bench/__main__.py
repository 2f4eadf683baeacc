"""`make bench`: every benchmark, each reporting ratios against a baseline from the same run."""

from __future__ import annotations

from bench import (
    api_bench,
    audit_bench,
    bookie_bench,
    bookie_tail_bench,
    cli_bench,
    console_bench,
    edges_bench,
    gc_bench,
    layers_bench,
    ledger_bench,
    ledger_tail_bench,
    placement_bench,
    produce_stores_bench,
    repair_bench,
    server_floor_bench,
    zookeeper_bench,
)


def main() -> None:
    print("## Admin API (set-bookie-rack vs raw aetcd transactions, racks-info at 10k bookies)")
    print(api_bench.report(api_bench.run(seconds=5.0)))
    print()
    print("## Admin API, layer by layer (defaults on; authentication off and on; vs raw)")
    print(layers_bench.report(layers_bench.run(seconds=5.0, rounds=2, bookies=32)))
    print()
    print("## Admin API floors (uvicorn with a do-nothing app; the etcd client alone)")
    print(server_floor_bench.report(server_floor_bench.run(seconds=4.0)))
    print()
    print("## Admin API on ZooKeeper (set-bookie-rack vs a raw kazoo setData loop)")
    print(zookeeper_bench.report(zookeeper_bench.run(seconds=5.0, bookies=32)))
    print()
    print("## Placement")
    placement_bench.main([])
    print()
    print("## pulsar-admin start-up (whole process, against python -c pass)")
    print(cli_bench.report(cli_bench.run()))
    print()
    print("## Bookie (1 KiB adds vs raw grouped pwrite+fdatasync)")
    print(bookie_bench.run(seconds=3.0))
    print()
    print("## Bookie tail (64 outstanding: lean and client load generators, GC and checkpoint)")
    print(bookie_tail_bench.run(3.0, 2, ["default", "gc-cpython", "no-checkpoint"],
                                ["lean", "client"], 3000))
    print()
    print("## Bookie adds while compacting (vs the same bookie idle)")
    print(gc_bench.run(seconds=5.0))
    print()
    print("## Ledgers and REST produce (E=3/Qw=3/Qa=2 on three bookie processes)")
    print(ledger_bench.run(seconds=3.0))
    print()
    print("## REST produce on etcd and on ZooKeeper (same run, alternating rounds)")
    print(produce_stores_bench.run(seconds=5.0, rounds=2))
    print()
    print("## Ledger tail (64 outstanding, the client's GC as CPython sets it and frozen)")
    print(ledger_tail_bench.run(3.0, 2))
    print()
    print("## Repair (one of six bookies lost, 1 GiB stored, producers running)")
    print(repair_bench.report(repair_bench.run(size_mib=1024, batch=100)))
    print()  # the same with BookKeeper's code default for rereplicationEntryBatchSize
    print(repair_bench.report(repair_bench.run(size_mib=1024, batch=10)))
    print()
    print("## Placement audit (Spark local[2] vs plain Python, 1M synthetic ledgers)")
    audit_bench.main([])
    print()
    print("## Placement console (headless Chromium; 1,000 and 10,000 bookies, 100k ledgers)")
    console_bench.main([])
    print()
    print("## Request and connection bounds (on vs off; normal clients beside stalled ones)")
    edges_bench.main(["--seconds", "4", "--rounds", "2"])
    edges_bench.main(["--stalled", "--seconds", "10", "--rounds", "1"])


if __name__ == "__main__":
    main()
