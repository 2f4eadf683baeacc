"""The cost of token authentication on the rack write, against no authentication, in one run.

    python -m bench.auth_bench [--seconds 5] [--rounds 2] [--bookies 32]

Two servers on the same etcd: one with authentication off, one with
`authenticationEnabled`/`authorizationEnabled` and an HS256 `tokenSecretKey`, every request
carrying a super-user's token. `set-bookie-rack` (the rack-write fast path, the benchmark of
`bench.api_bench`) is measured on each at 8 and 32 concurrent clients, alternating off/on for
`--rounds` rounds so that load from other processes on a shared machine falls on both; the
report gives requests/s and p50/p99 for each and the ratio on/off (target: >= 85%).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jwt

from bench.api_bench import compact_etcd, reset_rack_map, set_bookie_rack
from bench.harness import BenchServer, machine, off_on_level
from metastore.embedded import EmbeddedEtcd

CONCURRENCY = (8, 32)
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"


def auth_conf(secret: bytes) -> dict[str, str]:
    return {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenSecretKey": "data:;base64," + base64.b64encode(secret).decode(),
        "superUserRoles": "bench-admin",
    }


def run(seconds: float, rounds: int, bookies: int) -> dict[str, Any]:
    secret = os.urandom(32)
    authorization = "Bearer " + jwt.encode({"sub": "bench-admin"}, secret, algorithm="HS256")
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        etcd = EmbeddedEtcd(workdir / "etcd")
        etcd.start()
        try:
            with (
                BenchServer(etcd, workdir) as plain,
                BenchServer(etcd, workdir, auth_conf(secret), {"Authorization": authorization})
                as secured,
            ):
                for _ in range(rounds):
                    for clients in CONCURRENCY:
                        for mode, url, header in (("off", plain.url, ""),
                                                  ("on", secured.url, authorization)):  # fmt: skip
                            reset_rack_map(plain.url, etcd, bookies)
                            asyncio.run(compact_etcd(etcd))
                            measured = set_bookie_rack(url, clients, seconds, bookies, header)
                            samples.setdefault((mode, clients), []).append(measured)
        finally:
            etcd.stop()
    levels = []
    for clients in CONCURRENCY:
        levels.append({"clients": clients,
                       **off_on_level(samples[("off", clients)], samples[("on", clients)])})
    return {
        "machine": machine(),
        "client": samples[("off", CONCURRENCY[0])][0]["client"],
        "seconds_per_point": seconds,
        "rounds": rounds,
        "bookies": bookies,
        "levels": levels,
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        f"machine: {results['machine']}; HTTP load from {results['client']}; "
        f"{results['rounds']} rounds of {results['seconds_per_point']:g} s per point, "
        f"rack map of {results['bookies']} bookies",
        "",
        "| clients | auth off req/s | p50 ms | p99 ms | auth on (HS256) req/s | p50 ms | p99 ms "
        "| on/off |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in results["levels"]:
        off, on = level["off"], level["on"]
        lines.append(
            f"| {level['clients']} | {off['rps']:.0f} | {off['p50_ms']:.1f} | {off['p99_ms']:.1f} "
            f"| {on['rps']:.0f} | {on['p50_ms']:.1f} | {on['p99_ms']:.1f} | {level['ratio']:.0%} |"
        )
    lowest = min(level["ratio"] for level in results["levels"])
    lines += ["", f"target: at most 15% fewer requests/s with auth on: "
              f"{'met' if lowest >= 0.85 else 'NOT met'} (lowest on/off {lowest:.0%})"]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bookies", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    results = run(args.seconds, args.rounds, args.bookies)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
