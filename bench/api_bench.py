"""Admin API throughput and latency against the same etcd measured raw, in one run.

    python -m bench.api_bench [--seconds 5]

- `set-bookie-rack` (POST racks-info) requests/s and p50/p99 at 1, 8 and 32 concurrent
  clients, next to the raw aetcd transaction rate (compare mod_revision + put) at the same
  concurrency: the ratio is what we report.
- `GET racks-info` with 10,000 bookies configured: p50/p99 latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aetcd
import aiohttp
import httpx

from bench.harness import BenchServer, machine, percentile
from metastore.embedded import EmbeddedEtcd

CONCURRENCY = (1, 8, 32)


async def raw_transactions(etcd: EmbeddedEtcd, clients: int, seconds: float) -> float:
    client = aetcd.Client(host="127.0.0.1", port=etcd.client_port, timeout=5)
    await client.connect()
    tx = client.transactions
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        key = f"/bench/raw/{clients}/{w}".encode()
        revision = 0
        while time.perf_counter() < stop_at:
            ok, responses = await client.transaction(
                compare=[tx.mod(key) == revision], success=[tx.put(key, b"{}")], failure=[]
            )
            assert ok
            revision = responses[0].response_put.header.revision
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(clients)))
    elapsed = time.perf_counter() - started
    await client.close()
    return done / elapsed


async def set_bookie_rack(url: str, clients: int, seconds: float) -> dict[str, float]:
    """aiohttp as the load generator: httpx's async pool, not the server, tops out first."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(base_url=url, connector=connector) as http:

        async def worker(w: int) -> None:
            i = 0
            while time.perf_counter() < stop_at:
                bookie = f"10.{clients}.{w}.{i}:3181"
                begin = time.perf_counter()
                async with http.post(
                    f"/admin/v2/bookies/racks-info/{bookie}",
                    params={"group": "default"},
                    json={"rack": f"/rack{i % 20}"},
                ) as response:
                    await response.read()
                    assert response.status == 204, await response.text()
                latencies.append(time.perf_counter() - begin)
                i += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def racks_info_latency(url: str, etcd: EmbeddedEtcd, bookies: int = 10_000) -> dict[str, float]:
    document = {
        f"group-{g}": {
            f"10.{g}.{i // 250}.{i % 250}:3181": {"rack": f"/rack{i % 50}", "hostname": f"bk{i}"}
            for i in range(bookies // 10)
        }
        for g in range(10)
    }

    async def load() -> None:
        client = aetcd.Client(host="127.0.0.1", port=etcd.client_port, timeout=5)
        await client.put(b"/bookies", json.dumps(document).encode())
        await client.close()

    asyncio.run(load())
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as http:
        deadline = time.monotonic() + 10
        while len(http.get("/admin/v2/bookies/racks-info").json()) != 10:
            assert time.monotonic() < deadline, "server never saw the 10,000-bookie rack map"
        for _ in range(200):
            begin = time.perf_counter()
            response = http.get("/admin/v2/bookies/racks-info")
            latencies.append(time.perf_counter() - begin)
            assert response.status_code == 200
    return {
        "bookies": bookies,
        "bytes": len(response.content),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def run(seconds: float) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "seconds_per_point": seconds, "writes": []}
    with tempfile.TemporaryDirectory() as tmp:
        etcd = EmbeddedEtcd(Path(tmp) / "etcd")
        etcd.start()
        try:
            with BenchServer(etcd, Path(tmp)) as server:
                for clients in CONCURRENCY:
                    raw = asyncio.run(raw_transactions(etcd, clients, seconds))
                    api = asyncio.run(set_bookie_rack(server.url, clients, seconds))
                    results["writes"].append(
                        {"clients": clients, "raw_txn_per_s": raw, **api, "ratio": api["rps"] / raw}
                    )
                results["racks_info"] = racks_info_latency(server.url, etcd)
        finally:
            etcd.stop()
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"machine: {results['machine']}",
        "",
        "| clients | raw aetcd txn/s | set-bookie-rack req/s | ratio | p50 ms | p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["writes"]:
        lines.append(
            f"| {row['clients']} | {row['raw_txn_per_s']:.0f} | {row['rps']:.0f} | "
            f"{row['ratio']:.0%} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} |"
        )
    info = results["racks_info"]
    lines += [
        "",
        f"GET racks-info, {info['bookies']:,} bookies ({info['bytes']:,} bytes): "
        f"p50 {info['p50_ms']:.1f} ms, p99 {info['p99_ms']:.1f} ms",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results = run(args.seconds)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
