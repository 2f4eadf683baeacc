"""Rack writes and REST produce with the request and connection bounds on (the defaults)
against the same service with them off, in one run, on one etcd and the same bookies.

    python -m bench.edges_bench [--seconds 5] [--rounds 2]

"Off": maxHttpServerConnections=0, the idle, header and body timeouts 0, and produce bounds
(maxMessagesPerProduceRequest, maxMessagePublishBufferSizeInMB) far above the load. Each round
measures both servers one after the other, at 8 concurrent clients: `set-bookie-rack` on a
32-bookie map, and REST produce of one 1 KiB message per request. Reported: requests/s and
p50/p99 latency, and the on/off ratio of the rates.

    python -m bench.edges_bench --stalled [--seconds 10] [--rounds 1]

Normal clients (4 `set-bookie-rack`, 4 REST produce, 2 GET, all at once) first alone, then
while 2,000 idle and 200 dribbling connections (request headers a byte a second) are held on
the admin port and 200 connections hold half a frame on a bookie port, in one run. The admin
port's idle, header and body timeouts and the bookie's `serverFrameTimeoutSeconds` are 5 s;
the stalled connections come from a process of their own, which opens a new one for each one
cut, so their number holds through the window. Reported: each kind's rate and p50/p99 alone
and loaded, their ratios, and, per kind of stalled connection, how many were cut within the
timeout (plus the bookie's 1 s sweep and 0.5 s), before it, or never.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import resource
import selectors
import socket
import statistics
import struct
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
        listed = httpx.get(f"{url}/api/v1/bookie/list_bookies", params={"type": "rw"},
                           timeout=5).json()
        if len(listed) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError("bookies did not register")


def summary(rate: float, latencies: list[float]) -> dict[str, float]:
    return {"per_second": round(rate, 1),
            "p50_ms": round(percentile(latencies, 50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 99) * 1000, 2)}


# ---- the stalled-clients scenario -------------------------------------------------------

IDLE_CONNECTIONS = 2_000
DRIBBLING_CONNECTIONS = 200
HALF_FRAME_CONNECTIONS = 200
STALL_TIMEOUT = 5.0  # s: the admin port's idle, header and body timeouts, the bookie's frame one
# a cut counts as within its timeout up to this late: the bookie sweeps its connections once
# a second (storage.bookie.connections), so its cuts come up to 1 s after the timeout, plus
# 0.5 s for a busy event loop on either port
SWEEP = 1.5
MIX = (("rack_write", 4), ("produce", 4), ("get", 2))  # normal clients: kind, how many
STALLED = {
    "maxHttpServerConnections": "4096",  # room for the stalled ones and the normal clients
    "httpServerIdleTimeoutSeconds": str(STALL_TIMEOUT),
    "httpServerHeaderTimeoutSeconds": str(STALL_TIMEOUT),
    "httpServerBodyTimeoutSeconds": str(STALL_TIMEOUT),
}
BOOKIE_STALLED = {"serverFrameTimeoutSeconds": str(STALL_TIMEOUT)}
DRIBBLE = b"GET /admin/v2/namespaces/bench HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
HALF_FRAME = struct.pack(">I", 1000) + b"\x02\x00\x00\x00"  # 8 of a 1,004-byte frame


def raise_fd_limit() -> int:
    """RLIMIT_NOFILE's soft limit raised to its hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def get(session: aiohttp.ClientSession, n: int) -> int:
    async with session.get("/admin/v2/namespaces/bench" if n % 2
                           else "/admin/v2/bookies/racks-info") as answer:
        await answer.read()
        return answer.status


REQUESTS = {"rack_write": rack_write, "produce": produce, "get": get}


async def mixed(url: str, seconds: float) -> dict[str, tuple[float, list[float]]]:
    """The clients of `MIX` at once for `seconds`: each kind's requests/s and latencies."""
    latencies: dict[str, list[float]] = {kind: [] for kind, _ in MIX}
    deadline = time.perf_counter() + seconds

    async def client(kind: str, index: int, count: int) -> None:
        request = REQUESTS[kind]
        async with aiohttp.ClientSession(base_url=url) as session:
            n = index
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                status = await request(session, n)
                if status >= 300:
                    raise RuntimeError(f"{kind}: status {status}")
                latencies[kind].append(time.perf_counter() - started)
                n += count

    started = time.perf_counter()
    await asyncio.gather(*(client(kind, i, count) for kind, count in MIX for i in range(count)))
    elapsed = time.perf_counter() - started
    return {kind: (len(values) / elapsed, values) for kind, values in latencies.items()}


class Stalled:
    """One stalled connection: its socket, what it does, and since when its timeout runs."""

    def __init__(self, kind: str, port: int) -> None:
        self.kind = kind
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setblocking(False)
        self.position = 0
        self.next_byte = 0.0
        self.since = time.monotonic()  # idle: from the connect
        if kind == "half_frame":
            self.sock.sendall(HALF_FRAME)
            self.since = time.monotonic()
        elif kind == "dribbling":  # the header timeout runs from the first byte
            self.drip(self.since)

    def drip(self, now: float) -> bool:
        """The next byte of `DRIBBLE`, one a second; False when the peer has closed."""
        if self.position < len(DRIBBLE) and now >= self.next_byte:
            try:
                self.sock.send(DRIBBLE[self.position:self.position + 1])
                self.position += 1
            except BlockingIOError:
                pass
            except OSError:
                return False
            self.next_byte = now + 1.0
        return True


def stall(admin_port: int, bookie_port: int, ready: Any, stop: Any, results: Any) -> None:
    """In its own process: hold `IDLE_CONNECTIONS` idle and `DRIBBLING_CONNECTIONS` dribbling
    connections on the admin port and `HALF_FRAME_CONNECTIONS` holding half a frame on the
    bookie port, each replaced by a new one when the peer closes it, until `stop` is set; then
    wait (bounded) for the last ones to be cut. Puts on `results`, by kind: seconds from each
    connection's timeout start to its cut, and how many were never cut."""
    raise_fd_limit()
    counts = {"idle": IDLE_CONNECTIONS, "dribbling": DRIBBLING_CONNECTIONS,
              "half_frame": HALF_FRAME_CONNECTIONS}  # fmt: skip
    ports = {"idle": admin_port, "dribbling": admin_port, "half_frame": bookie_port}
    selector = selectors.DefaultSelector()
    live: dict[int, Stalled] = {}
    cuts: dict[str, list[float]] = {kind: [] for kind in counts}

    refused = {kind: 0 for kind in counts}
    pending = [kind for kind, count in counts.items() for _ in range(count)]

    def open_pending() -> None:
        """Open the connections due; one that cannot be opened is counted and retried."""
        retry = []
        for kind in pending:
            try:
                stalled = Stalled(kind, ports[kind])
            except OSError:
                refused[kind] += 1
                retry.append(kind)
                continue
            live[stalled.sock.fileno()] = stalled
            selector.register(stalled.sock, selectors.EVENT_READ)
        pending[:] = retry

    def cut(stalled: Stalled) -> None:
        live.pop(stalled.sock.fileno())
        cuts[stalled.kind].append(time.monotonic() - stalled.since)
        selector.unregister(stalled.sock)
        stalled.sock.close()
        if not stop.is_set():
            pending.append(stalled.kind)

    open_pending()
    ready.set()
    final_deadline = float("inf")
    while (live or pending) and time.monotonic() < final_deadline:
        if stop.is_set() and final_deadline == float("inf"):
            final_deadline = time.monotonic() + STALL_TIMEOUT + 15
            pending.clear()
        now = time.monotonic()
        for stalled in list(live.values()):
            if stalled.kind == "dribbling" and not stalled.drip(now):
                cut(stalled)
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # data: an answer (a 408 or the like) before the close
                cut(live[sock.fileno()])
        open_pending()
    never = {kind: 0 for kind in counts}
    for stalled in live.values():
        never[stalled.kind] += 1
        stalled.sock.close()
    selector.close()
    results.put({"cuts": cuts, "never": never, "refused": refused})


def collect(staller: Any, results: Any) -> dict[str, Any]:
    """What `stall` puts on `results`, once its last connections are cut (bounded)."""
    deadline = time.monotonic() + STALL_TIMEOUT + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            found: dict[str, Any] = results.get(timeout=0.5)
            return found
        if not staller.is_alive():
            raise RuntimeError(f"the stalled connections' process exited ({staller.exitcode})")
    raise RuntimeError("the stalled connections' process did not report")


def cut_summary(cuts: list[float], never: int, refused: int) -> dict[str, Any]:
    return {"cut": len(cuts), "refused": refused,
            "within": sum(1 for c in cuts if c <= STALL_TIMEOUT + SWEEP),
            "early": sum(1 for c in cuts if c < STALL_TIMEOUT - 0.05), "never": never,
            "p50_s": round(percentile(cuts, 50), 2), "max_s": round(max(cuts, default=0.0), 2)}


def stalled_run(seconds: float, rounds: int) -> dict[str, Any]:
    """`rounds` of: the normal clients unloaded, then again while the stalled connections are
    held (each one cut replaced at once), on one service, etcd and three bookies."""
    limit = raise_fd_limit()
    phases: dict[str, dict[str, list[dict[str, float]]]] = {
        phase: {kind: [] for kind, _ in MIX} for phase in ("unloaded", "loaded")}
    stalls: list[dict[str, Any]] = []
    loads: list[float] = []
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        etcd = EmbeddedEtcd(work / "etcd")
        etcd.start()
        bookies = LocalBookies(work / "bookies", etcd.url, free_ports(3), conf=BOOKIE_STALLED)
        bookies.start()
        try:
            with BenchServer(etcd, work, {**BASE, **STALLED}) as server:
                wait_for_bookies(server.url, 3)
                prepare(server.url)
                asyncio.run(mixed(server.url, 1.0))  # connections and caches warm
                for _ in range(rounds):
                    for kind, measured in asyncio.run(mixed(server.url, seconds)).items():
                        phases["unloaded"][kind].append(summary(*measured))
                    ready, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
                    staller = spawn.Process(target=stall, args=(
                        server.port, bookies.bookies[0].port, ready, stop, results))
                    staller.start()
                    try:
                        if not ready.wait(120):
                            raise RuntimeError("stalled connections not opened")
                        measured_loaded = asyncio.run(mixed(server.url, seconds))
                        loads.append(os.getloadavg()[0])
                        stop.set()
                        stalls.append(collect(staller, results))
                    finally:
                        staller.join(timeout=30)
                        if staller.is_alive():
                            staller.kill()
                    for kind, measured in measured_loaded.items():
                        phases["loaded"][kind].append(summary(*measured))
        finally:
            bookies.stop()
            etcd.stop()
    cut = {kind: cut_summary([c for s in stalls for c in s["cuts"][kind]],
                             sum(s["never"][kind] for s in stalls),
                             sum(s["refused"][kind] for s in stalls))
           for kind in ("idle", "dribbling", "half_frame")}  # fmt: skip
    return {"machine": machine(), "seconds": seconds, "rounds": rounds, "fd_limit": limit,
            "load_average": loads, "phases": phases, "cuts": cut}


def stalled_report(results: dict[str, Any]) -> str:
    def mean(rows: list[dict[str, float]], key: str) -> float:
        return statistics.mean(row[key] for row in rows)

    lines = [
        f"# {results['machine']}; {results['rounds']} round(s) of {results['seconds']:g} s "
        f"unloaded, then {results['seconds']:g} s beside {IDLE_CONNECTIONS:,} idle + "
        f"{DRIBBLING_CONNECTIONS} dribbling admin connections and {HALF_FRAME_CONNECTIONS} "
        f"half frames on a bookie (timeouts {STALL_TIMEOUT:g} s); RLIMIT_NOFILE "
        f"{results['fd_limit']}; 1-min load average at the end of each loaded window "
        + ", ".join(f"{load:.2f}" for load in results["load_average"]),
        "",
        "| normal clients | unloaded req/s | p50 ms | p99 ms | loaded req/s | p50 ms | p99 ms "
        "| rate loaded/unloaded | p99 loaded/unloaded |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, clients in MIX:
        quiet, busy = results["phases"]["unloaded"][kind], results["phases"]["loaded"][kind]
        lines.append(
            f"| {kind} ({clients} clients) | {mean(quiet, 'per_second'):.0f} "
            f"| {mean(quiet, 'p50_ms'):.1f} | {mean(quiet, 'p99_ms'):.1f} "
            f"| {mean(busy, 'per_second'):.0f} | {mean(busy, 'p50_ms'):.1f} "
            f"| {mean(busy, 'p99_ms'):.1f} "
            f"| {mean(busy, 'per_second') / mean(quiet, 'per_second'):.2f} "
            f"| {mean(busy, 'p99_ms') / mean(quiet, 'p99_ms'):.2f} |")
    lines += [
        "",
        f"| stalled connections | cut | within {STALL_TIMEOUT:g} s + {SWEEP:g} s | before "
        f"{STALL_TIMEOUT:g} s | never cut | connects refused | p50 s | max s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, row in results["cuts"].items():
        lines.append(f"| {kind} | {row['cut']} | {row['within']} | {row['early']} "
                     f"| {row['never']} | {row['refused']} | {row['p50_s']} | {row['max_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--stalled", action="store_true",
                        help="normal clients unloaded and beside stalled connections instead")
    args = parser.parse_args(argv)
    if args.stalled:
        stalled_results = stalled_run(args.seconds, args.rounds)
        print(stalled_report(stalled_results))
        if args.json:
            args.json.write_text(json.dumps(stalled_results, indent=2))
        return
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
