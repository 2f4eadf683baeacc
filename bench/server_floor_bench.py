"""What the server's CPU per rack write rests on: the floors under the project's layers.

    python -m bench.server_floor_bench [--seconds 4]

Two parts, each in its own process, measured with the process's CPU time (/proc or
`time.process_time`):

- HTTP: uvicorn (httptools, uvloop) serving a do-nothing ASGI app that reads the body and
  answers 204, under `wrk` with the rack-write requests of `bench.api_bench` at 1 and 32
  clients: uvicorn's protocol alone, with the access log on (the server's log set-up:
  `api.__main__.configure_logging`, masking on), and with the admin port's protocol
  (`api.http.connection_limits.http_protocol`: connection bounds, header case, access line).
- etcd client: sequential aetcd transactions (compare `mod_revision`, put) from one task,
  uvloop: a 2-byte value; the rack write's shape (a 1.7 KB rack map and a 3.4 KB change
  record at a new key each time, both in one transaction) without and with a watch on the
  map's key (the server keeps one: each write comes back as one event). Client CPU per
  transaction and the transaction's wall time, p50.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aetcd
import httpx
import uvloop

from bench.api_bench import rack_map_document, set_bookie_rack_wrk
from bench.harness import cpu_seconds, machine
from metastore.embedded import EmbeddedEtcd, free_port

HTTP_APP = r'''
import sys, uvicorn
from api.__main__ import configure_logging
from api.auth.secrets import install_log_masking
from api.http.connection_limits import http_protocol
from api.settings import ConnectionLimits
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})
install_log_masking()
configure_logging()
port, access, guarded = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
http = http_protocol(ConnectionLimits()) if guarded else "httptools"
uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, http=http, access_log=access,
                              log_config=None, log_level=None, lifespan="off")).run()
'''
HTTP_CASES = (("uvicorn, no access log", False, False), ("uvicorn, access log", True, False),
              ("admin port protocol, access log", True, True))


def http_floor(seconds: float, workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for name, access, guarded in HTTP_CASES:
        port = free_port()
        with open(workdir / "http.log", "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-c", HTTP_APP, str(port), str(int(access)), str(int(guarded))],
                stdout=log, stderr=log)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(url, timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            for clients in (1, 32):
                set_bookie_rack_wrk(url, clients, 1, 32)  # warm
                before = cpu_seconds(server.pid)
                result = set_bookie_rack_wrk(url, clients, seconds, 32)
                spent = cpu_seconds(server.pid) - before
                rows.append({"case": name, "clients": clients, "rps": result["rps"],
                             "cpu_us": spent * 1e6 / (result["rps"] * seconds)})
        finally:
            server.terminate()
            server.wait(timeout=15)
    return rows


async def etcd_floor(port: int, shape: str, watch: bool, count: int) -> dict[str, Any]:
    client = aetcd.Client(host="127.0.0.1", port=port, timeout=5)
    await client.connect()
    tx = client.transactions
    key = f"/bench/floor/{shape}/{int(watch)}".encode()
    value = b"{}" if shape == "2-byte value" else rack_map_document(32)
    record = b"r" * (2 * len(value))
    watching: asyncio.Task[None] | None = None
    events = 0
    if watch:
        async def follow() -> None:
            nonlocal events
            async for _ in await client.watch(key):
                events += 1
        watching = asyncio.ensure_future(follow())
        await asyncio.sleep(0.3)
    revision, latencies = 0, []
    warm = count // 10
    for i in range(warm + count):
        if i == warm:
            cpu, wall = time.process_time(), time.perf_counter()
        success = [tx.put(key, value)]
        if shape != "2-byte value":
            success.append(tx.put(key + b"/history/%d" % i, record))
        begin = time.perf_counter()
        _, responses = await client.transaction(
            compare=[tx.mod(key) == revision], success=success, failure=[])
        if i >= warm:
            latencies.append(time.perf_counter() - begin)
        revision = responses[0].response_put.header.revision
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if watching is not None:
        watching.cancel()
    await client.delete_prefix(key)
    await client.close()
    return {"case": shape + (", watched" if watch else ""), "txn_per_s": count / wall,
            "cpu_us": cpu * 1e6 / count, "p50_ms": statistics.median(latencies) * 1000}


def run(seconds: float) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "load_average_1min": [os.getloadavg()[0]]}
    with tempfile.TemporaryDirectory() as tmp:
        results["http"] = http_floor(seconds, Path(tmp))
        etcd = EmbeddedEtcd(Path(tmp) / "etcd")
        etcd.start()
        try:
            results["etcd"] = [
                uvloop.run(etcd_floor(etcd.client_port, shape, watch, 1500))
                for shape, watch in (("2-byte value", False), ("rack write", False),
                                     ("rack write", True))]
        finally:
            etcd.stop()
    results["load_average_1min"].append(os.getloadavg()[0])
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"machine: {results['machine']}; load average "
             + " -> ".join(f"{x:.1f}" for x in results["load_average_1min"]), "",
             "| HTTP, no handler | clients | req/s | server CPU µs/request |",
             "|---|---:|---:|---:|"]
    lines += [f"| {r['case']} | {r['clients']} | {r['rps']:,.0f} | {r['cpu_us']:.0f} |"
              for r in results["http"]]
    lines += ["", "| etcd client, one task | txn/s | client CPU µs/txn | p50 ms |",
              "|---|---:|---:|---:|"]
    lines += [f"| {r['case']} | {r['txn_per_s']:,.0f} | {r['cpu_us']:.0f} | {r['p50_ms']:.2f} |"
              for r in results["etcd"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    print(report(run(args.seconds)))


if __name__ == "__main__":
    main()
