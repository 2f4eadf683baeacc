"""Snapshot export rate from etcd (ledgers/s), `pipeline.snapshot` at N ledgers.

    python -m bench.snapshot_bench [--ledgers 100000] [--bookies 30]

A fresh etcd (its own data dir, free ports) gets N ledgers written in bulk through the ledger
store (`metastore.ledgers.LedgerMetadataStore.create`, many in flight), each a closed V3 ledger
with Pulsar's custom metadata and 1-2 ensembles of 3 among B bookies. Then, in one run:

- the export at concurrency 1, 4 and 8 (500 keys a page): wall time and ledgers/s, with the
  five tables written;
- the baseline: the same values read serially in pages of 2,000 (one unbounded range is over
  gRPC's 4 MiB answer limit at 100k ledgers), then decoded in one loop
  (`decode_ledger_metadata`) — the least a single Python process must do — so the export's
  cost above reading and decoding shows as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import LedgerMetadata, LedgerState, decode_ledger_metadata
from metastore.ledgers import LedgerMetadataStore
from metastore.versioned_keys import VersionedKeys
from pipeline.snapshot import snapshot
from pipeline.sources import EtcdSource
from placement import PlacementConfig


def ledger(i: int, bookies: int) -> LedgerMetadata:
    ids = [f"10.0.{b // 250}.{b % 250}:3181" for b in range(bookies)]
    first = tuple(ids[(i + k) % bookies] for k in range(3))
    ensembles = {0: first}
    if i % 3 == 0:
        ensembles[50] = (first[0], first[1], ids[(i + 7) % bookies])
    name = f"tenant-{i % 3}/ns-{i % 12}/persistent/topic-{i % 500}"
    return LedgerMetadata(i, 3, 2, 2, ensembles, state=LedgerState.CLOSED, last_entry_id=99,
                          length=102400, custom_metadata={
                              "application": b"pulsar", "component": b"managed-ledger",
                              "pulsar/managed-ledger": name.encode()})


async def write(url: str, n: int, bookies: int, in_flight: int = 256) -> float:
    from metastore.store import parse_metadata_store_url

    keys = VersionedKeys(parse_metadata_store_url(url), timeout=30)
    store = LedgerMetadataStore(keys)
    started = time.perf_counter()
    try:
        for start in range(0, n, in_flight):
            await asyncio.gather(*(store.create(ledger(i, bookies))
                                   for i in range(start, min(n, start + in_flight))))
    finally:
        await keys.close()
    return time.perf_counter() - started


async def baseline(url: str) -> tuple[int, float, float]:
    """(ledgers, seconds to read every value in pages of 2,000, seconds to decode them)."""
    source = EtcdSource(url, timeout=60)
    started = time.perf_counter()
    try:
        values = [item async for page in source.ledger_pages(2000, 1) for item in page]
    finally:
        await source.close()
    read = time.perf_counter() - started
    started = time.perf_counter()
    for ledger_id, raw in values:
        decode_ledger_metadata(ledger_id, raw)
    return len(values), read, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--bookies", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as tmp:
        etcd = EmbeddedEtcd(Path(tmp) / "etcd")
        etcd.start()
        try:
            wrote = asyncio.run(write(etcd.url, args.ledgers, args.bookies))
            print(json.dumps({"write_seconds": round(wrote, 1),
                              "write_ledgers_per_s": round(args.ledgers / wrote)}), flush=True)
            results = {}
            for concurrency in (1, 4, 8):
                started = time.perf_counter()
                counts = asyncio.run(snapshot(etcd.url, Path(tmp) / f"out{concurrency}",
                                              PlacementConfig(), page_size=500,
                                              concurrency=concurrency, timeout=60))
                seconds = time.perf_counter() - started
                assert counts["ledgers"] == args.ledgers, counts
                results[concurrency] = seconds
                print(json.dumps({"concurrency": concurrency, "seconds": round(seconds, 2),
                                  "ledgers_per_s": round(args.ledgers / seconds),
                                  "fragments": counts["fragments"]}), flush=True)
            count, read, decode = asyncio.run(baseline(etcd.url))
            assert count == args.ledgers
            print(json.dumps({"baseline_read_seconds": round(read, 2),
                              "baseline_decode_seconds": round(decode, 2),
                              "decode_only_ledgers_per_s": round(count / decode),
                              "export_over_read_plus_decode": {
                                  c: round(s / (read + decode), 2) for c, s in results.items()}}))
        finally:
            etcd.stop()


if __name__ == "__main__":
    main()
