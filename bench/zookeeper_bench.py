"""`set-bookie-rack` on ZooKeeper against a raw ZooKeeper `setData` loop, in one run.

    python -m bench.zookeeper_bench [--seconds 5] [--bookies 32]

The service runs on a ZooKeeper of its own (Debian's package); at 1, 8 and 32 concurrent
clients it measures:

- raw: kazoo, the client library the service uses, each client a loop of compare-and-swap
  `setData(path, value, version)` on a znode of its own, completed on the event loop the way
  the service completes its calls; once with a 2-byte value and once with a value as large
  as the rack map;
- `set-bookie-rack` (POST racks-info, load from `wrk` when installed) on a rack map of
  `--bookies` bookies, each request moving one bookie to another rack.

The ratio of the two rates is what is reported: the machine is shared, so absolute numbers
say little, same-run ratios do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bench.api_bench import (
    CONCURRENCY,
    RACKS,
    bookie_id,
    level_row,
    rack_map_document,
    ratio_target,
    set_bookie_rack,
    summary,
    wait_until_served,
    write_table,
)
from bench.harness import BenchServer, machine
from metastore.embedded_zookeeper import EmbeddedZooKeeper

RAW_PREFIX = "/bench/raw"


async def raw_set_data(hosts: str, clients: int, seconds: float, value: bytes) -> dict[str, float]:
    client = KazooClient(hosts=hosts, timeout=30)
    client.start(30)
    loop = asyncio.get_running_loop()
    try:
        for w in range(clients):
            client.ensure_path(f"{RAW_PREFIX}/{w}")
        latencies: list[float] = []
        stop_at = time.perf_counter() + seconds

        async def call(make: Any) -> Any:
            future: asyncio.Future[Any] = loop.create_future()

            def settle(outcome: Any) -> None:
                try:
                    result = outcome.get_nowait()
                except Exception as exc:
                    loop.call_soon_threadsafe(future.set_exception, exc)
                else:
                    loop.call_soon_threadsafe(future.set_result, result)

            make().rawlink(settle)
            return await future

        async def worker(w: int) -> None:
            path = f"{RAW_PREFIX}/{w}"
            version = (await call(lambda: client.exists_async(path))).version
            while time.perf_counter() < stop_at:
                begin = time.perf_counter()
                stat = await call(lambda v=version: client.set_async(path, value, v))
                latencies.append(time.perf_counter() - begin)
                version = stat.version

        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        elapsed = time.perf_counter() - started
        client.delete(RAW_PREFIX, recursive=True)
        return summary(len(latencies) / elapsed, latencies)
    finally:
        client.stop()
        client.close()


def reset_rack_map(url: str, hosts: str, bookies: int) -> int:
    """The same rack map before each level (under the service's chroot), once the server has
    seen it; the document's size in bytes."""
    document = rack_map_document(bookies)
    client = KazooClient(hosts=f"{hosts}/pulsar", timeout=30)
    client.start(30)
    try:
        if client.exists("/bookies"):
            client.set("/bookies", document)
        else:
            client.create("/bookies", document, makepath=True)
    finally:
        client.stop()
        client.close()
    last = bookies - 1
    expected = {"rack": f"/rack{last % RACKS}", "hostname": f"bk{last}"}
    path = f"/admin/v2/bookies/racks-info/{bookie_id(last)}"
    wait_until_served(url, path, lambda answer: answer == expected, "the reset rack map")
    return len(document)


def run(seconds: float, bookies: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zookeeper")
        zookeeper.start()
        try:
            store = _ZooKeeperUrl(f"zk:{zookeeper.hosts()}/pulsar")
            with BenchServer(store, Path(tmp)) as server:  # type: ignore[arg-type]
                levels = [level(server.url, zookeeper.hosts(), clients, seconds, bookies)
                          for clients in CONCURRENCY]
        finally:
            zookeeper.stop()
    return {"machine": machine(), "seconds_per_point": seconds, "bookies": bookies,
            "levels": levels}


class _ZooKeeperUrl:
    """What `BenchServer` reads of its store: the URL the service is started with."""

    def __init__(self, url: str) -> None:
        self.url = url


def level(url: str, hosts: str, clients: int, seconds: float, bookies: int) -> dict[str, Any]:
    raw = asyncio.run(raw_set_data(hosts, clients, seconds, b"{}"))
    document = rack_map_document(bookies)
    raw_document = asyncio.run(raw_set_data(hosts, clients, seconds, document))
    size = reset_rack_map(url, hosts, bookies)
    api = set_bookie_rack(url, clients, seconds, bookies)
    return level_row(clients, raw, raw_document, api, size)


def report(results: dict[str, Any]) -> str:
    levels = results["levels"]
    lines = [
        f"machine: {results['machine']}; HTTP load from {levels[0]['api']['client']}",
        "",
        f"set-bookie-rack on ZooKeeper, rack map of {results['bookies']:,} bookies "
        f"({levels[-1]['document_bytes']:,} bytes):",
        "",
        *write_table(levels, "raw setData/s", "raw setData/s, document-sized"),
    ]
    lines += ["", f"target: {ratio_target(levels)}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bookies", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results = run(args.seconds, args.bookies)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
