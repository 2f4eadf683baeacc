"""Rack writes and REST produce with the request and connection bounds on (the defaults)
against the same service with them off, in one run, on one etcd and the same bookies.

    python -m bench.edges_bench [--seconds 5] [--rounds 2]

"Off": maxHttpServerConnections=0, the idle, header and body timeouts 0, and produce bounds
(maxMessagesPerProduceRequest, maxMessagePublishBufferSizeInMB) far above the load. Each round
measures both servers one after the other, at 8 concurrent clients: `set-bookie-rack` on a
32-bookie map, and REST produce of one 1 KiB message per request. Reported: requests/s and
p50/p99 latency, and the on/off ratio of the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench.harness import BenchServer, machine, percentile
from metastore.embedded import EmbeddedEtcd
from storage.supervisor import LocalBookies, free_ports

CLIENTS = 8
OFF = {
    "maxHttpServerConnections": "0",
    "httpServerIdleTimeoutSeconds": "0",
    "httpServerHeaderTimeoutSeconds": "0",
    "httpServerBodyTimeoutSeconds": "0",
    "maxMessagesPerProduceRequest": "1000000",
    "maxMessagePublishBufferSizeInMB": "100000",
}
BASE = {"initializeClusterMetadata": "false", "accessLogEnabled": "false"}


async def load(url: str, seconds: float, request: Any) -> tuple[float, list[float]]:
    """`CLIENTS` loops of `request(session, n)` for `seconds`: requests/s and latencies."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client(index: int) -> None:
        async with aiohttp.ClientSession(base_url=url) as session:
            n = index
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                status = await request(session, n)
                if status >= 300:
                    raise RuntimeError(f"status {status}")
                latencies.append(time.perf_counter() - started)
                n += CLIENTS

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return len(latencies) / (time.perf_counter() - started), latencies


async def rack_write(session: aiohttp.ClientSession, n: int) -> int:
    async with session.post(f"/admin/v2/bookies/racks-info/10.0.0.{n % 32}:3181",
                            params={"group": "default"},
                            json={"rack": f"/rack-{n % 7}", "hostname": "h"}) as answer:
        await answer.read()
        return answer.status


PAYLOAD = "x" * 1024


async def produce(session: aiohttp.ClientSession, n: int) -> int:
    async with session.post(f"/topics/persistent/bench/ns/t{n % CLIENTS}",
                            json={"messages": [{"payload": PAYLOAD}]}) as answer:
        await answer.read()
        return answer.status


def prepare(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        http.put("/admin/v2/clusters/bench", json={"serviceUrl": url})
        http.put("/admin/v2/tenants/bench", json={"allowedClusters": ["bench"]})
        http.put("/admin/v2/namespaces/bench/ns")
        rack_map = {"default": {f"10.0.0.{i}:3181": {"rack": "/rack-0", "hostname": "h"}
                                for i in range(32)}}
        http.put("/admin/v2/bookies/racks-info", json=rack_map).raise_for_status()


def wait_for_bookies(url: str, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = httpx.get(f"{url}/admin/v2/bookies/all", timeout=5).json()
        if len(listed.get("bookies", [])) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError("bookies did not register")


def summary(rate: float, latencies: list[float]) -> dict[str, float]:
    return {"per_second": round(rate, 1),
            "p50_ms": round(percentile(latencies, 50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 99) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results: dict[str, dict[str, list[dict[str, float]]]] = {
        "on": {"rack_write": [], "produce": []}, "off": {"rack_write": [], "produce": []}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        etcd = EmbeddedEtcd(work / "etcd")
        etcd.start()
        bookies = LocalBookies(work / "bookies", etcd.url, free_ports(3))
        bookies.start()
        try:
            with BenchServer(etcd, work, BASE) as on, \
                    BenchServer(etcd, work, {**BASE, **OFF}) as off:
                wait_for_bookies(on.url, 3)
                prepare(on.url)
                for _ in range(args.rounds):
                    for name, server in (("on", on), ("off", off)):
                        for kind, request in (("rack_write", rack_write), ("produce", produce)):
                            rate, latencies = asyncio.run(load(server.url, args.seconds, request))
                            results[name][kind].append(summary(rate, latencies))
        finally:
            bookies.stop()
            etcd.stop()
    print(f"# {machine()}; {CLIENTS} clients, {args.seconds:g} s per measurement")
    for kind in ("rack_write", "produce"):
        for name in ("on", "off"):
            print(kind, name, results[name][kind])
        ratio = (sum(r["per_second"] for r in results["on"][kind])
                 / sum(r["per_second"] for r in results["off"][kind]))
        print(f"{kind}: bounds on / off = {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
