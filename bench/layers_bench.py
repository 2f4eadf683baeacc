"""Where a rack write's time goes, layer by layer, with the defaults on, in one run.

    python -m bench.layers_bench [--seconds 5] [--rounds 2] [--bookies 32]

One etcd, two servers with the defaults (change history on, request rules on): one with
authentication off, one with token authentication and authorisation (HS256, every request
carrying a super-user's token). At 1, 8 and 32 concurrent clients, alternating for
`--rounds` rounds: raw aetcd transactions (compare `mod_revision` + put, 2-byte value), then
`set-bookie-rack` from `wrk` on each server. The servers run with their layer timers on
(`metastore.layer_times`): per request, the CPU time of the request rules, the rack-write
fast path (bookie, content type, access, body parse, change context), authorisation, the
group commit's mutations with the change records, serialising, the cache updates (write
through and watch events), the wall time of the etcd transaction per write, and the server's
whole CPU time (from /proc), whose remainder is uvicorn (HTTP parsing, response writing,
access log), the event loop and the gRPC client. The report gives the rate as a share of
the raw rate, p50/p99, and the layers in microseconds per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import jwt

from bench.api_bench import compact_etcd, raw_transactions, reset_rack_map, set_bookie_rack
from bench.auth_bench import auth_conf
from bench.harness import BenchServer, cpu_seconds, machine
from metastore.embedded import EmbeddedEtcd
from metastore.layer_times import ENV

CONCURRENCY = (1, 8, 32)
ETCD_WALL = "etcd round trip (wall)"
CPU_LAYERS = (
    "request rules",
    "hot path",
    "authorisation",
    "change history records (with the mutations)",
    "group commit (mutations, serialising)",
    "cache update (write-through)",
    "cache update (watch event)",
)


def layer_totals(server: BenchServer, file: Path) -> dict[str, dict[str, float]]:
    """The server's layer totals now (it writes them on SIGUSR1)."""
    assert server.process is not None
    file.unlink(missing_ok=True)
    server.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while True:
        try:
            text = file.read_text()
            if text:
                totals: dict[str, dict[str, float]] = json.loads(text)
                return totals
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, "the server did not write its layer times"
        time.sleep(0.01)


def measure(server: BenchServer, file: Path, clients: int, seconds: float, bookies: int,
            authorization: str) -> dict[str, Any]:  # fmt: skip
    assert server.process is not None
    before, cpu_before = layer_totals(server, file), cpu_seconds(server.process.pid)
    api = set_bookie_rack(server.url, clients, seconds, bookies, authorization)
    cpu_after, after = cpu_seconds(server.process.pid), layer_totals(server, file)
    requests = api["rps"] * seconds
    layers: dict[str, float] = {}
    for layer in (*CPU_LAYERS, ETCD_WALL):
        spent = after.get(layer, {}).get("seconds", 0.0) - before.get(layer, {}).get("seconds", 0)
        layers[layer] = spent / requests * 1e6
    writes = (after.get(ETCD_WALL, {}).get("count", 0)
              - before.get(ETCD_WALL, {}).get("count", 0))  # fmt: skip
    return {
        **api,
        "server_cpu_us": (cpu_after - cpu_before) / requests * 1e6,
        "layers_us": layers,
        "requests_per_write": requests / writes if writes else float("nan"),
        "etcd_ms_per_write": (layers[ETCD_WALL] * requests / writes / 1000) if writes else 0.0,
    }


def run(seconds: float, rounds: int, bookies: int) -> dict[str, Any]:
    secret = os.urandom(32)
    authorization = "Bearer " + jwt.encode({"sub": "bench-admin"}, secret, algorithm="HS256")
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    load: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        files = {"off": workdir / "layers-off.json", "on": workdir / "layers-on.json"}
        try:
            with (
                BenchServer(etcd, workdir, env={ENV: str(files["off"])}) as plain,
                BenchServer(etcd, workdir, auth_conf(secret), {"Authorization": authorization},
                            env={ENV: str(files["on"])}) as secured,
            ):
                for _ in range(rounds):
                    for clients in CONCURRENCY:
                        load.append(os.getloadavg()[0])
                        asyncio.run(compact_etcd(etcd))
                        raw = asyncio.run(raw_transactions(etcd, clients, seconds))
                        samples.setdefault(("raw", clients), []).append(raw)
                        for mode, server, header in (("off", plain, ""),
                                                     ("on", secured, authorization)):
                            reset_rack_map(plain.url, etcd, bookies)
                            asyncio.run(compact_etcd(etcd))
                            measured = measure(server, files[mode], clients, seconds, bookies,
                                               header)  # fmt: skip
                            measured["ratio"] = measured["rps"] / raw["rps"]
                            samples.setdefault((mode, clients), []).append(measured)
        finally:
            etcd.stop()
    return {
        "machine": machine(),
        "load_average_1min": [min(load), max(load)],
        "seconds_per_point": seconds,
        "rounds": rounds,
        "bookies": bookies,
        "levels": [{"clients": clients, "raw": samples[("raw", clients)],
                    "off": samples[("off", clients)], "on": samples[("on", clients)]}
                   for clients in CONCURRENCY],
    }


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else \
        f"{format(low, fmt)}-{format(high, fmt)}"


def report(results: dict[str, Any]) -> str:
    low, high = results["load_average_1min"]
    lines = [
        f"machine: {results['machine']}; load average (1 min) {low:.1f}-{high:.1f}; "
        f"{results['rounds']} rounds of {results['seconds_per_point']:g} s per point, rack map "
        f"of {results['bookies']} bookies; ranges over the rounds",
        "",
        "| clients | auth | raw txn/s | set-bookie-rack req/s | ratio to raw | p50 ms | p99 ms "
        "| requests per etcd write |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for level in results["levels"]:
        raw = [s["rps"] for s in level["raw"]]
        for mode in ("off", "on"):
            got = level[mode]
            lines.append(
                f"| {level['clients']} | {mode} | {_span(raw, ',.0f')} "
                f"| {_span([s['rps'] for s in got], ',.0f')} "
                f"| {_span([s['ratio'] * 100 for s in got], '.0f')}% "
                f"| {_span([s['p50_ms'] for s in got], '.1f')} "
                f"| {_span([s['p99_ms'] for s in got], '.1f')} "
                f"| {_span([s['requests_per_write'] for s in got], '.1f')} |"
            )
    lines += ["", "Server time per request, microseconds (means over the rounds; CPU time "
              "unless marked wall):", ""]
    header = ["clients", "auth", *CPU_LAYERS, "rest (uvicorn, event loop, gRPC client)",
              "server CPU", "etcd transaction per write, ms (wall)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for level in results["levels"]:
        for mode in ("off", "on"):
            got = level[mode]
            layers = {layer: statistics.mean(s["layers_us"][layer] for s in got)
                      for layer in CPU_LAYERS}  # fmt: skip
            cpu = statistics.mean(s["server_cpu_us"] for s in got)
            etcd_ms = statistics.mean(s["etcd_ms_per_write"] for s in got)
            cells = [str(level["clients"]), mode, *(f"{layers[x]:.0f}" for x in CPU_LAYERS),
                     f"{cpu - sum(layers.values()):.0f}", f"{cpu:.0f}", f"{etcd_ms:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bookies", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results = run(args.seconds, args.rounds, args.bookies)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(report(results))


if __name__ == "__main__":
    main()
