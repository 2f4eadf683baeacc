"""Two choices of the bookie, measured: the CRC32C wheel and the index store.

CRC32C: `crc32c` against `google-crc32c` (and stdlib CRC32 for scale) on a 1 KiB packaged entry,
computed as the bookie does, header then payload with a running value.

Index: which store for the bookie's (ledger, entry) -> location index: SQLite, LMDB or RocksDB.

Same workload for each: 200,000 locations over 20 ledgers written in durable batches of 10,000
(a checkpoint), then 50,000 random point gets and 10,000 "last entry of ledger" lookups (the
floor lookup that answers a read of entry -1). Stores not installed are skipped (`rocksdict`
is not a project dependency; install it to compare).

    .venv/bin/python -m bench.bookie_choices_bench
"""

from __future__ import annotations

import importlib.util
import os
import random
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

N = 200_000
LEDGERS = 20
BATCH = 10_000
KEY = struct.Struct(">QQ")
VALUE = struct.Struct(">IQI").pack(1, 123_456_789, 1056)
KEYS = [(ledger, entry) for ledger in range(LEDGERS) for entry in range(N // LEDGERS)]


def timed(count: int, work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return count / (time.perf_counter() - started)


def sqlite_store(directory: Path, sample: list[tuple[int, int]]) -> tuple[float, float, float]:
    db = sqlite3.connect(directory / "index.sqlite", isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=full")
    db.execute("create table loc(l integer, e integer, v blob, primary key(l, e)) without rowid")

    def put() -> None:
        for i in range(0, N, BATCH):
            db.execute("begin")
            rows = [(ledger, entry, VALUE) for ledger, entry in KEYS[i : i + BATCH]]
            db.executemany("insert or replace into loc values (?, ?, ?)", rows)
            db.execute("commit")

    def get() -> None:
        for ledger, entry in sample:
            db.execute("select v from loc where l = ? and e = ?", (ledger, entry)).fetchone()

    def last() -> None:
        for i in range(10_000):
            db.execute("select max(e) from loc where l = ?", (i % LEDGERS,)).fetchone()

    return timed(N, put), timed(len(sample), get), timed(10_000, last)


def lmdb_store(directory: Path, sample: list[tuple[int, int]]) -> tuple[float, float, float]:
    lmdb: Any = importlib.import_module("lmdb")

    env = lmdb.open(str(directory / "lmdb"), map_size=1 << 30)

    def put() -> None:
        for i in range(0, N, BATCH):
            with env.begin(write=True) as tx:
                for ledger, entry in KEYS[i : i + BATCH]:
                    tx.put(KEY.pack(ledger, entry), VALUE)

    def get() -> None:
        for ledger, entry in sample:
            with env.begin() as tx:
                tx.get(KEY.pack(ledger, entry))

    def last() -> None:
        for i in range(10_000):
            with env.begin() as tx:
                cursor = tx.cursor()
                if cursor.set_range(KEY.pack(i % LEDGERS + 1, 0)):
                    cursor.prev()
                else:
                    cursor.last()
                cursor.key()

    return timed(N, put), timed(len(sample), get), timed(10_000, last)


def rocksdict_store(directory: Path, sample: list[tuple[int, int]]) -> tuple[float, float, float]:
    rocksdict: Any = importlib.import_module("rocksdict")  # optional, not a dependency

    db = rocksdict.Rdict(str(directory / "rocks"), options=rocksdict.Options(raw_mode=True))
    sync = rocksdict.WriteOptions()
    sync.sync = True

    def put() -> None:
        for i in range(0, N, BATCH):
            batch = rocksdict.WriteBatch(raw_mode=True)
            for ledger, entry in KEYS[i : i + BATCH]:
                batch.put(KEY.pack(ledger, entry), VALUE)
            db.write(batch, write_opt=sync)

    def get() -> None:
        for ledger, entry in sample:
            db.get(KEY.pack(ledger, entry))

    def last() -> None:
        for i in range(10_000):
            it = db.iter()
            it.seek_for_prev(KEY.pack(i % LEDGERS, (1 << 64) - 1))
            it.key()

    result = timed(N, put), timed(len(sample), get), timed(10_000, last)
    db.close()
    return result


def crc_table() -> str:
    entry = os.urandom(1024 + 36)
    header, payload = memoryview(entry)[:32], memoryview(entry)[36:]
    count = 200_000
    rows = []
    crc32c: Any = importlib.import_module("crc32c").crc32c
    rows.append(
        ("crc32c", timed(count, lambda: [crc32c(payload, crc32c(header)) for _ in range(count)]))
    )
    if importlib.util.find_spec("google_crc32c"):
        extend: Any = importlib.import_module("google_crc32c").extend
        # It takes only bytes, not a memoryview: the slices must be copied (not timed here).
        header_b, payload_b = bytes(header), bytes(payload)
        rows.append(
            (
                "google-crc32c",
                timed(
                    count, lambda: [extend(extend(0, header_b), payload_b) for _ in range(count)]
                ),
            )
        )
    import zlib

    rows.append(
        (
            "zlib.crc32 (not CRC32C)",
            timed(count, lambda: [zlib.crc32(payload, zlib.crc32(header)) for _ in range(count)]),
        )
    )
    lines = ["| digest | 1 KiB entries/s |", "|---|---|"]
    lines += [f"| {name} | {rate:,.0f} |" for name, rate in rows]
    return "\n".join(lines)


def run() -> str:
    sample = random.Random(1).sample(KEYS, 50_000)
    stores: dict[str, Callable[[Path, list[tuple[int, int]]], tuple[float, float, float]]] = {
        "SQLite (WAL, synchronous=full)": sqlite_store
    }
    if importlib.util.find_spec("lmdb"):
        stores["LMDB (py-lmdb)"] = lmdb_store
    if importlib.util.find_spec("rocksdict"):
        stores["RocksDB (rocksdict)"] = rocksdict_store
    lines = [
        "| store | durable batched puts/s | point gets/s | last-entry lookups/s |",
        "|---|---|---|---|",
    ]
    for name, store in stores.items():
        with tempfile.TemporaryDirectory(dir=os.getcwd(), prefix="index-bench-") as tmp:
            put, get, last = store(Path(tmp), sample)
        lines.append(f"| {name} | {put:,.0f} | {get:,.0f} | {last:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(crc_table())
    print()
    print(run())
