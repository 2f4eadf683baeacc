"""Spark audit vs a plain single-process Python audit of the same Parquet snapshot.

    python -m bench.audit_bench [--ledgers 1000000] [--also 10000000] [--data DIR]

Both read the same synthetic snapshot (pipeline.synth, made once and kept under --data).
Spark: `python -m pipeline audit --master local[2]` as a subprocess (JVM start included in
the wall time; the audit's own time and the check stage are reported too). Plain:
`pipeline.plain.plain_audit`, the scalar `check_fragment` per fragment. Peak RSS is
sampled from /proc every 0.2 s for the driver Python, the JVM (driver, and the local
executors in it) and the sum of the Python workers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from pipeline.synth import SynthSpec, generate

ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` so far (its own threads)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmd.split(" ")[0]:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "workers"
    return "driver"


def run_measured(cmd: list[str]) -> tuple[float, dict[str, int], str]:
    """(wall seconds, peak RSS MiB per kind + CPU seconds per kind, stdout) of a process tree.

    CPU seconds are the last sample of each process (up to 0.2 s short for short-lived ones).
    """
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peaks = {"driver": 0, "jvm": 0, "workers": 0}
    cpu: dict[int, tuple[str, float]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = {"driver": 0, "jvm": 0, "workers": 0}
            todo, seen = [proc.pid], set()
            while todo:
                pid = todo.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                kind = "driver" if pid == proc.pid else _kind(pid)
                if kind in now:
                    now[kind] += _rss_kib(pid)
                    cpu[pid] = (kind, max(_cpu_s(pid), cpu.get(pid, (kind, 0.0))[1]))
                todo += _children(pid)
            for k, v in now.items():
                peaks[k] = max(peaks[k], v)
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}): {err[-2000:]}")
    measured = {f"rss_mib_{k}": v // 1024 for k, v in peaks.items()}
    for kind, seconds in cpu.values():
        measured[f"cpu_s_{kind}"] = measured.get(f"cpu_s_{kind}", 0) + round(seconds)
    return wall, measured, out


def say(line: str) -> None:
    """A progress line on stderr, with the time and the load average."""
    print(f"[bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {line}",
          file=sys.stderr, flush=True)


def snapshot(data: Path, ledgers: int) -> Path:
    where = data / f"snapshot-{ledgers}"
    if not (where / "ground_truth").exists():
        say(f"synth: {ledgers:,} ledgers into {where}")
        generate(SynthSpec(ledgers=ledgers, bookies=1000, racks=10, groups=4, seed=7), where)
    return where


def spark_run(snap: Path, out: Path) -> dict[str, object]:
    wall, rss, _ = run_measured([sys.executable, "-m", "pipeline", "audit", "--snapshot",
                                      str(snap), "--out", str(out), "--master", "local[2]"])
    summary = json.loads((out / "summary.json").read_text())
    n = summary["fragments"]
    return {"fragments": n, "wall_s": round(wall, 1), "audit_s": summary["seconds"],
            "check_s": summary["check_seconds"],
            "fragments_per_s_wall": round(n / wall), "fragments_per_s_audit":
            round(n / summary["seconds"]), "measured": rss,
            "violating": summary["violating_fragments"]}


def plain_run(snap: Path) -> dict[str, object]:
    code = ("import json,sys,time;from pathlib import Path;from pipeline.plain import "
            "plain_audit;t=time.perf_counter();f=plain_audit(Path(sys.argv[1]));"
            "print(json.dumps([len(f),time.perf_counter()-t]))")
    wall, rss, stdout = run_measured([sys.executable, "-c", code, str(snap)])
    import pyarrow.dataset as ds

    n = ds.dataset(snap / "fragments", format="parquet").count_rows()
    found, inner = json.loads(stdout)
    return {"fragments": n, "wall_s": round(wall, 1), "audit_s": round(inner, 1),
            "fragments_per_s_wall": round(n / wall), "measured": rss,
            "violating": found}


NUMPY_CODE = """
import json, sys, time
from pathlib import Path
import numpy as np, pyarrow.dataset as ds
from pipeline.io import padded
from pipeline.plain import load_placement_inputs
from placement.batch import check_batch
t = time.perf_counter()
snap = Path(sys.argv[1]); c = load_placement_inputs(snap)
led = ds.dataset(snap / "ledgers", format="parquet").to_table(
    columns=["ledger_id", "namespace", "write_quorum", "ack_quorum"])
ids = led.column("ledger_id").to_numpy(); order = np.argsort(ids); ids = ids[order]
index = c.policy_index()
pol = np.array([index.get(n, c.default_policy) for n in led.column("namespace").to_pylist()],
               np.int32)[order]
qw = led.column("write_quorum").to_numpy()[order]; qa = led.column("ack_quorum").to_numpy()[order]
found = 0
for b in ds.dataset(snap / "fragments", format="parquet").to_batches(
        columns=["ledger_id", "ensemble"], batch_size=262144):
    at = np.searchsorted(ids, b.column("ledger_id").to_numpy())
    _, kinds = check_batch(c.batch, c.policies, c.config, padded(b.column("ensemble")),
                           qw[at], qa[at], pol[at])
    found += int((kinds != 0).sum())
print(json.dumps([found, time.perf_counter() - t]))
"""


def numpy_run(snap: Path) -> dict[str, object]:
    """The batch check in one process without Spark (ledger join by sorted search)."""
    wall, measured, stdout = run_measured([sys.executable, "-c", NUMPY_CODE, str(snap)])
    import pyarrow.dataset as ds

    n = ds.dataset(snap / "fragments", format="parquet").count_rows()
    found, inner = json.loads(stdout)
    return {"fragments": n, "wall_s": round(wall, 1), "audit_s": round(inner, 1),
            "fragments_per_s_wall": round(n / wall), "measured": measured,
            "violating": found}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_bench")
    parser.add_argument("--ledgers", type=int, default=1_000_000)
    parser.add_argument("--also", type=int, nargs="*", default=[],
                        help="more Spark-only sizes (e.g. 10000000)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "bench-audit")
    parser.add_argument("--skip-plain", action="store_true")
    args = parser.parse_args(argv)
    snap = snapshot(args.data, args.ledgers)
    say(f"Spark audit, local[2], {args.ledgers:,} ledgers")
    results: dict[str, object] = {"spark_local2": spark_run(snap, args.data / "out")}
    print(json.dumps(results), flush=True)
    if not args.skip_plain:
        say("plain audit")
        results["plain"] = plain_run(snap)
        spark = results["spark_local2"]
        plain = results["plain"]
        assert isinstance(spark, dict) and isinstance(plain, dict)
        results["ratio_wall"] = round(float(plain["wall_s"]) / float(spark["wall_s"]), 2)
        results["ratio_audit"] = round(float(plain["wall_s"]) / float(spark["audit_s"]), 2)
    say("numpy batch check, one process")
    results["numpy_single_process"] = numpy_run(snap)
    for more in args.also:
        big = snapshot(args.data, more)
        say(f"Spark audit, local[2], {more:,} ledgers")
        results[f"spark_local2_{more}"] = spark_run(big, args.data / f"out-{more}")
    say("done")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
