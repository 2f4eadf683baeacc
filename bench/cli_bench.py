"""`pulsar-admin` start-up: whole-process wall time of the CLI against the bare interpreter.

Each round runs, in turn, `python -c pass` (the baseline: the same interpreter with the same
site-packages, so the project's editable-install hook is in both), `pulsar-admin --version`
and a few GET commands (the fast path's, and one that needs the Typer app) against a real
server (an embedded etcd and `python -m api` on free ports). The rounds interleave the
commands so that load from elsewhere on the machine falls on all of them alike; the report
gives each command's median and its ratio to the baseline's median. Run it alone:
`python -m bench.cli_bench [--rounds 30]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_bench import running_server
from bench.harness import machine

PULSAR_ADMIN = str(Path(sys.executable).parent / "pulsar-admin")
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "pulsar-admin --version": [PULSAR_ADMIN, "--version"],
    "pulsar-admin clusters list": [PULSAR_ADMIN, "clusters", "list"],
    "pulsar-admin bookies racks-placement": [PULSAR_ADMIN, "bookies", "racks-placement"],
    "pulsar-admin namespaces policies public/default": [
        PULSAR_ADMIN,
        "namespaces",
        "policies",
        "public/default",
    ],
    # Not one of cli.fastpath's reads: the whole Typer app loads.
    "pulsar-admin clusters list -c (Typer)": [PULSAR_ADMIN, "clusters", "list", "-c"],
}
BASELINE = "python -c pass"


def wall_time(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed: {done.stderr.decode()}")
    return elapsed


def run(rounds: int = 30) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as (_, url):
        conf = Path(tmp) / "client.conf"
        conf.write_text(f"webServiceUrl={url}/\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
        env["PULSAR_CLIENT_CONF"] = str(conf)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for command in COMMANDS.values():  # warm the page cache once
            wall_time(command, env, Path(tmp))
        for _ in range(rounds):
            for name, command in COMMANDS.items():
                times[name].append(wall_time(command, env, Path(tmp)))
    base = statistics.median(times[BASELINE])
    return {
        "machine": machine(),
        "rounds": rounds,
        "results": [
            {
                "command": name,
                "median_ms": statistics.median(v) * 1000,
                "ratio": statistics.median(v) / base,
            }
            for name, v in times.items()
        ],
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        f"{results['machine']}; {results['rounds']} interleaved rounds, whole-process medians",
        "",
        "| command | median | x `python -c pass` |",
        "|---|---|---|",
    ]
    for row in results["results"]:
        lines.append(f"| `{row['command']}` | {row['median_ms']:.1f} ms | {row['ratio']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    print(report(run(args.rounds)))


if __name__ == "__main__":
    main()
