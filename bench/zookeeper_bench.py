"""`set-bookie-rack` on ZooKeeper against a raw ZooKeeper `setData` loop, in one run.

    python -m bench.zookeeper_bench [--seconds 5] [--bookies 32] [--rounds 1] [--layers]

The service runs on a ZooKeeper of its own (Debian's package); at 1, 8 and 32 concurrent
clients it measures:

- raw: kazoo, the client library the service uses, each client a loop of compare-and-swap
  `setData(path, value, version)` on a znode of its own, completed on the event loop the way
  the service completes its calls (`metastore.kazoo_bridge`); once with a 2-byte value and
  once with a value as large as the rack map;
- `set-bookie-rack` (POST racks-info, load from `wrk` when installed) on a rack map of
  `--bookies` bookies, each request moving one bookie to another rack.

The ratio of the two rates is what is reported: the machine is shared, so absolute numbers
say little, same-run ratios do. The report also gives the server's CPU time per request and the
requests per ZooKeeper write of the rack map (its znode's version before and after: one
`multi` of group commit serves that many requests).

With `--layers`, each level also measures, in this process and on the same ZooKeeper (under
a chroot of its own, which the service does not watch), what a rack write is built from, one
layer added at a time (`LAYERS`): the raw `multi` a recorded write sends, the same through
the store's backend, group commit's read-modify-write, the watch-fed cache, the change record.
A layer's share at a level is the mean latency it adds over the layer below, out of the
service's mean latency (the HTTP layer: the service's over the last in-process layer).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
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
from bench.harness import BenchServer, cpu_seconds, machine
from metastore import paths
from metastore.backend import CREATE, Put
from metastore.cache import WatchedRange
from metastore.change_history import ChangeContext, ChangeLog, KeyChange, recording
from metastore.embedded_zookeeper import EmbeddedZooKeeper
from metastore.kazoo_bridge import InlineCallbackHandler, loop_inbox
from metastore.store import MetadataStore, open_metadata_store

RAW_PREFIX = "/bench/raw"
LAYERS_CHROOT = "/bench/layers"
LAYER_RUNS = itertools.count()
# In-process layers of a rack write, each adding one thing to the one before (`--layers`).
LAYERS = (
    ("raw multi", "kazoo `multi`: guarded setData of the rack map, create of a record-sized znode"),
    ("backend multi", "the same two ops through the store's ZooKeeper backend"),
    ("group commit", "`update_json` of the rack map (read-modify-write, batches): each batch"
     " reads the key first"),
    ("+ watch-fed cache", "the same with the rack map mirrored by a watch, as the service has"
     " it: batches start from the cache"),
    ("+ change record", "the same with a change context: each update's record built, a"
     " batch's records created in one znode"),
)


async def timed_clients(
    clients: int, seconds: float, operation: Callable[[int], Awaitable[Any]]
) -> dict[str, float]:
    """`clients` concurrent loops of `await operation(client)` for `seconds`: the rate,
    latencies (`summary`, with the mean) and this process's CPU time (all its threads) per
    operation."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        while time.perf_counter() < stop_at:
            begin = time.perf_counter()
            await operation(w)
            latencies.append(time.perf_counter() - begin)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(w) for w in range(clients)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {**summary(len(latencies) / elapsed, latencies),
            "mean_ms": statistics.fmean(latencies) * 1000,
            "cpu_ms": cpu / len(latencies) * 1000}  # fmt: skip


def raw_client(hosts: str) -> tuple[KazooClient, Callable[[Any], Awaitable[Any]]]:
    """A started kazoo client with the handler the service's backend uses, and `await
    complete(kazoo_async_result)`: its outcome on the running loop, as the backend completes
    its calls (`metastore.kazoo_bridge.loop_inbox`)."""
    client = KazooClient(hosts=hosts, timeout=30, handler=InlineCallbackHandler())
    inbox = loop_inbox(client, asyncio.get_running_loop())
    client.start(30)

    async def complete(outcome: Any) -> Any:
        return await inbox.settle(outcome)

    return client, complete


async def raw_set_data(hosts: str, clients: int, seconds: float, value: bytes) -> dict[str, float]:
    client, complete = raw_client(hosts)
    try:
        versions = []
        for w in range(clients):
            client.ensure_path(f"{RAW_PREFIX}/{w}")
            versions.append(client.exists(f"{RAW_PREFIX}/{w}").version)

        async def set_data(w: int) -> None:
            stat = await complete(client.set_async(f"{RAW_PREFIX}/{w}", value, versions[w]))
            versions[w] = stat.version

        measured = await timed_clients(clients, seconds, set_data)
        client.delete(RAW_PREFIX, recursive=True)
        return measured
    finally:
        client.stop()
        client.close()


def record_sized(document: bytes) -> bytes:
    """A change record of one rack write to `document` (its size is what matters)."""
    rack_map = json.loads(document)
    moved = json.loads(document)
    bookie = next(iter(moved["default"]))
    moved["default"][bookie]["rack"] = "/moved"
    change = KeyChange(paths.BOOKIES_RACK_CONFIG, None, None, documents=(rack_map, moved))
    return ChangeLog().record(BENCH_CONTEXT, [change])[1]


BENCH_CONTEXT = ChangeContext(None, "127.0.0.1", "POST", "/admin/v2/bookies/racks-info/bench")


async def layers(hosts: str, clients: int, seconds: float, bookies: int) -> dict[str, Any]:
    """Each of `LAYERS` at `clients`, in order (see the module docstring)."""
    document = rack_map_document(bookies)
    record = record_sized(document)
    sequence = itertools.count()
    results: dict[str, Any] = {}
    chroot = f"{LAYERS_CHROOT}/{next(LAYER_RUNS)}"  # records deleted afterwards, the rest kept
    client, complete = raw_client(hosts)
    try:
        client.ensure_path(f"{chroot}/raw/records")
        versions = []
        for w in range(clients):
            client.create(f"{chroot}/raw/{w}", document)
            versions.append(0)

        async def raw_multi(w: int) -> None:
            tx = client.transaction()
            tx.set_data(f"{chroot}/raw/{w}", document, versions[w])
            tx.create(f"{chroot}/raw/records/{next(sequence):012d}", record)
            replies = await complete(tx.commit_async())
            versions[w] = replies[0].version

        results["raw multi"] = await timed_clients(clients, seconds, raw_multi)
        store = open_metadata_store(f"zk:{hosts}{chroot}")
        try:
            results.update(await store_layers(store, clients, seconds, document, record))
        finally:
            await store.close()
        for records in ("raw/records", "multi/records", paths.CHANGE_HISTORY.lstrip("/")):
            await drop_children(client, complete, f"{chroot}/{records}")
    finally:
        client.stop()
        client.close()
    return results


async def drop_children(
    client: KazooClient, complete: Callable[[Any], Awaitable[Any]], path: str
) -> None:
    """Delete the znodes under `path`, a thousand requests in flight at a time."""
    names = client.get_children(path)
    for start in range(0, len(names), 1000):
        await asyncio.gather(*(complete(client.delete_async(f"{path}/{name}"))
                               for name in names[start : start + 1000]))  # fmt: skip


async def store_layers(
    store: MetadataStore, clients: int, seconds: float, document: bytes, record: bytes
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    backend = store.backend
    sequence = itertools.count()
    for w in range(clients):
        await store.put(f"/multi/{w}", document)
    await store.put("/multi/records/0", b"")
    versions = [0] * clients

    async def backend_multi(w: int) -> None:
        path = f"/multi/{w}"
        [written, _] = await backend.multi(
            [Put(path, document, versions[w]), Put(f"/multi/records/r{next(sequence)}", record,
                                                   CREATE)])  # fmt: skip
        assert written is not None
        versions[w] = written.version

    results["backend multi"] = await timed_clients(clients, seconds, backend_multi)

    def move(w: int) -> Callable[[Any], Any]:
        rack = f"/rack{next(sequence) % RACKS}"

        def change(rack_map: Any) -> Any:
            rack_map["default"][bookie_id(w % len(rack_map["default"]))]["rack"] = rack
            return rack_map

        return change

    async def group_commit(w: int) -> None:
        await store.update_json(paths.BOOKIES_RACK_CONFIG, move(w))

    async def recorded(w: int) -> None:
        with recording(BENCH_CONTEXT):
            await store.update_json(paths.BOOKIES_RACK_CONFIG, move(w))

    await store.put(paths.BOOKIES_RACK_CONFIG, document)
    results["group commit"] = await timed_clients(clients, seconds, group_commit)
    watched = WatchedRange(store, paths.BOOKIES_RACK_CONFIG)
    await watched.start()
    try:
        results["+ watch-fed cache"] = await timed_clients(clients, seconds, group_commit)
        results["+ change record"] = await timed_clients(clients, seconds, recorded)
    finally:
        await watched.stop()
    return results


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


def run(
    seconds: float, bookies: int, with_layers: bool = False, rounds: int = 1
) -> dict[str, Any]:
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        # change records pile up at 1,000s a second (the service prunes them every 10 s)
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zookeeper", heap="1g")
        zookeeper.start()
        try:
            store = _ZooKeeperUrl(f"zk:{zookeeper.hosts()}/pulsar")
            with BenchServer(store, Path(tmp)) as server:  # type: ignore[arg-type]
                levels = []
                for clients in CONCURRENCY:
                    levels.append(level(server.url, zookeeper.hosts(), clients, seconds,
                                        bookies, with_layers, rounds,
                                        server_pid(server)))  # fmt: skip
                    loads.append(os.getloadavg()[0])
        finally:
            zookeeper.stop()
    return {"machine": machine(), "seconds_per_point": seconds, "bookies": bookies,
            "rounds": rounds, "load_average": [min(loads), max(loads)], "levels": levels}


def rack_map_version(hosts: str) -> int:
    """The version of the service's rack map znode: one more per write group commit sends."""
    client = KazooClient(hosts=f"{hosts}/pulsar", timeout=30)
    client.start(30)
    try:
        return int(client.exists(paths.BOOKIES_RACK_CONFIG).version)
    finally:
        client.stop()
        client.close()


class _ZooKeeperUrl:
    """What `BenchServer` reads of its store: the URL the service is started with."""

    def __init__(self, url: str) -> None:
        self.url = url


def server_pid(server: BenchServer) -> int:
    assert server.process is not None
    return server.process.pid


def level(
    url: str, hosts: str, clients: int, seconds: float, bookies: int, with_layers: bool,
    rounds: int, server_pid: int,
) -> dict[str, Any]:
    """`rounds` rounds of every measurement at `clients`, one after the other within each
    round; each figure is the median of its rounds."""
    document = rack_map_document(bookies)
    samples: dict[str, list[dict[str, Any]]] = {}
    size = 0
    for _ in range(rounds):
        taken = {
            "raw": asyncio.run(raw_set_data(hosts, clients, seconds, b"{}")),
            "raw_document": asyncio.run(raw_set_data(hosts, clients, seconds, document)),
        }
        if with_layers:
            for name, measured in asyncio.run(layers(hosts, clients, seconds, bookies)).items():
                taken[f"layer {name}"] = measured
        size = reset_rack_map(url, hosts, bookies)
        version = rack_map_version(hosts)
        cpu = cpu_seconds(server_pid)
        api = set_bookie_rack(url, clients, seconds, bookies)
        api["cpu_ms"] = (cpu_seconds(server_pid) - cpu) / (api["rps"] * seconds) * 1000
        writes = rack_map_version(hosts) - version
        api["requests_per_write"] = api["rps"] * seconds / writes if writes else 0.0
        api["mean_ms"] = clients / api["rps"] * 1000  # closed loop: clients over the rate
        taken["api"] = api
        for key, measured in taken.items():
            samples.setdefault(key, []).append(measured)
    medians = {key: median_of(taken) for key, taken in samples.items()}
    row = level_row(clients, medians["raw"], medians["raw_document"], medians["api"], size)
    row["layers"] = {key.removeprefix("layer "): measured for key, measured in medians.items()
                     if key.startswith("layer ")}  # fmt: skip
    return row


def median_of(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (other entries from the first), and every
    round's rate."""
    middle = dict(samples[0])
    for key, value in samples[0].items():
        if isinstance(value, float | int):
            middle[key] = statistics.median(sample[key] for sample in samples)
    middle["rounds_rps"] = [sample["rps"] for sample in samples]
    return middle


def layer_table(levels: list[dict[str, Any]]) -> list[str]:
    """Each layer's rate, p50, mean, the mean latency it adds as a share of the service's,
    and the CPU time per operation of the process it runs in (the bench's; the server's
    for the service), by client count."""
    lines = ["| clients | layer | ops/s | p50 ms | p99 ms | mean ms | adds ms | share "
             "| CPU ms/op |",
             "|---:|:---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in levels:
        total = row["api"]["mean_ms"]
        below = 0.0
        steps = [*row["layers"].items(), ("HTTP service", row["api"])]
        for name, measured in steps:
            mean = measured["mean_ms"]
            lines.append(
                f"| {row['clients']} | {name} | {measured['rps']:.0f} | {measured['p50_ms']:.2f} "
                f"| {measured['p99_ms']:.2f} | {mean:.2f} | {mean - below:+.2f} "
                f"| {(mean - below) / total:.0%} | {measured['cpu_ms']:.2f} |"
            )
            below = mean
    return lines


def report(results: dict[str, Any]) -> str:
    levels = results["levels"]
    low, high = results["load_average"]
    lines = [
        f"machine: {results['machine']}; load average {low:.1f}-{high:.1f}; "
        f"HTTP load from {levels[0]['api']['client']}; median of {results['rounds']} round(s)",
        "",
        f"set-bookie-rack on ZooKeeper, rack map of {results['bookies']:,} bookies "
        f"({levels[-1]['document_bytes']:,} bytes):",
        "",
        *write_table(levels, "raw setData/s", "raw setData/s, document-sized"),
    ]
    lines += ["", "server CPU per set-bookie-rack (user + system, all threads): " + ", ".join(
        f"{level['api']['cpu_ms'] * 1000:.0f} µs at {level['clients']}" for level in levels)]
    lines += ["", "set-bookie-rack requests per ZooKeeper write of the rack map (group commit): "
              + ", ".join(f"{level['api']['requests_per_write']:.1f} at {level['clients']}"
                          for level in levels)]  # fmt: skip
    lines += ["", f"target: {ratio_target(levels)}"]
    if levels[0]["layers"]:
        lines += ["", "layers (in this process, then the service over HTTP):", "",
                  *layer_table(levels)]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bookies", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds per level; each figure is the median of its rounds")
    parser.add_argument("--layers", action="store_true",
                        help="also measure a rack write layer by layer (module docstring)")
    args = parser.parse_args()
    results = run(args.seconds, args.bookies, args.layers, args.rounds)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
