"""Processes for benchmarks: an etcd and the real server, on free ports, in a temp dir."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from metastore.embedded import EmbeddedEtcd, free_port

REPO = Path(__file__).resolve().parent.parent


class BenchServer:
    def __init__(
        self,
        etcd: EmbeddedEtcd,
        workdir: Path,
        conf: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """`conf`: broker.conf keys for the server; `headers`: sent by the readiness check;
        `env`: environment variables added to the server's."""
        self.etcd = etcd
        self.workdir = workdir
        self.conf = conf or {}
        self.headers = headers or {}
        self.env = env or {}
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> BenchServer:
        command = [
            sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(self.port),
            "--metadata-store-url", self.etcd.url, "--cluster-name", "bench",
        ]  # fmt: skip
        if self.conf:
            conf = self.workdir / f"broker-{self.port}.conf"
            conf.write_text("".join(f"{key}={value}\n" for key, value in self.conf.items()))
            command += ["--config", str(conf)]
        with open(self.workdir / "server.log", "ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log,
                                            env={**os.environ, **self.env})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                ready = httpx.get(
                    f"{self.url}/admin/v2/bookies/racks-info", headers=self.headers, timeout=1
                )
                if ready.is_success:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=15)


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, all its threads (/proc/<pid>/stat fields
    14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def off_on_level(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, Any]:
    """One level of an off/on comparison from its rounds' samples (each with `rps`, `p50_ms`,
    `p99_ms`): the means of each side, the ratio on/off and every round's rate."""

    def mean(samples: list[dict[str, Any]]) -> dict[str, float]:
        return {key: statistics.mean(s[key] for s in samples)
                for key in ("rps", "p50_ms", "p99_ms")}  # fmt: skip

    off_mean, on_mean = mean(off), mean(on)
    return {
        "off": off_mean,
        "on": on_mean,
        "ratio": on_mean["rps"] / off_mean["rps"],
        "rounds_rps": {"off": [s["rps"] for s in off], "on": [s["rps"] for s in on]},
    }
