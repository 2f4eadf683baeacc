"""The Spark audit on a synthetic snapshot: exact findings, true aggregates, a safe plan."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.plain import load_placement_inputs
from pipeline.schema import TABLES
from pipeline.synth import write_table
from placement.violations import Violation, member_violations

pytestmark = pytest.mark.slow


def verdicts(out: Path) -> dict[tuple[int, int], int]:
    t = pq.read_table(out / "fragment_verdicts").to_pandas()
    bad = t[t.violations != 0]
    return dict(zip(zip(bad.ledger_id, bad.segment, strict=True), bad.violations,
                    strict=True))


def test_finds_exactly_the_injected_violations(snapshot: Path,
                                               audited: tuple[Path, dict[str, Any]]) -> None:
    out, summary = audited
    truth = pq.read_table(snapshot / "ground_truth").to_pandas()
    want = dict(zip(zip(truth.ledger_id, truth.segment, strict=True), truth.violations,
                    strict=True))
    got = verdicts(out)
    hits = sum(1 for k, v in got.items() if want.get(k) == v)
    assert hits / len(got) == 1.0  # precision, kinds included
    assert hits / len(want) == 1.0  # recall
    assert summary.violating_fragments == len(want)
    assert summary.fragments == len(pq.read_table(out / "fragment_verdicts"))
    findings = pq.read_table(out / "ledger_findings").to_pandas()
    assert set(findings.ledger_id) == set(truth.ledger_id)


def test_aggregates_match_a_direct_computation(snapshot: Path,
                                               audited: tuple[Path, dict[str, Any]]) -> None:
    out, _ = audited
    cluster = load_placement_inputs(snapshot)
    led = pq.read_table(snapshot / "ledgers").to_pandas()
    frag = pq.read_table(snapshot / "fragments",
                         columns=TABLES["fragments"].names).to_pandas().merge(
        led.rename(columns={"last_entry_id": "ledger_last"}), on="ledger_id")
    frag["bytes"] = frag.length * (frag.last_entry_id - frag.first_entry_id + 1) / (
        frag.ledger_last + 1)
    frag["share"] = frag.bytes * frag.write_quorum / frag.ensemble.map(len)
    member = frag[["ledger_id", "ensemble", "share"]].explode("ensemble")
    member["bookie"] = [cluster.bookie_ids[b] for b in member.ensemble]
    member["rack"] = [cluster.topology.rack_of(b) for b in member.bookie]
    member["group"] = [cluster.topology.group_of.get(b) or "(no group)" for b in member.bookie]
    agg = pd.read_parquet(out / "aggregates.parquet")
    for dim in ("bookie", "rack", "group"):
        direct = member.groupby(dim).agg(bytes=("share", "sum"),
                                         ledgers=("ledger_id", "nunique"))
        mine = agg[(agg.dim == dim) & (agg.replicas > 0)].set_index("name")
        assert sorted(mine.index) == sorted(direct.index), dim
        assert (mine.ledgers.sort_index() == direct.ledgers.sort_index()).all(), dim
        assert ((mine.bytes.sort_index() - direct.bytes.sort_index()).abs()
                <= 1e-6 * direct.bytes.sort_index()).all(), dim
    ns = pd.read_parquet(out / "namespaces.parquet").set_index("namespace")
    direct_ns = led.groupby("namespace").agg(ledgers=("ledger_id", "count"),
                                             bytes=("length", "sum"))
    assert (ns.ledgers.sort_index() == direct_ns.ledgers.sort_index()).all()
    assert (ns.bytes.sort_index() == direct_ns.bytes.sort_index()).all()


def test_plan_never_proposes_a_forbidden_bookie(snapshot: Path,
                                                audited: tuple[Path, dict[str, Any]]) -> None:
    out, _ = audited
    cluster = load_placement_inputs(snapshot)
    plan = pq.read_table(out / "repair_plan.parquet").to_pandas()
    assert len(plan) > 0
    led = pq.read_table(snapshot / "ledgers").to_pandas().set_index("ledger_id")
    policy = cluster.policy_index()
    for ledger_id, bookie_in in zip(plan.ledger_id, plan.bookie_in, strict=True):
        affinity = cluster.affinity(policy.get(led.namespace[ledger_id],
                                               cluster.default_policy))
        assert bookie_in in cluster.topology.writable
        assert member_violations(cluster.topology, bookie_in, cluster.config,
                                 affinity=affinity) == Violation.NONE, (ledger_id, bookie_in)


def test_applied_plan_leaves_only_what_it_could_not_fix(
        spark: Any, snapshot: Path, audited: tuple[Path, dict[str, Any]],
        tmp_path: Path) -> None:
    from pipeline.audit import run_audit

    out, _ = audited
    unfixable = pq.read_table(out / "unfixable.parquet").to_pandas()
    assert len(unfixable) > 0  # the degraded group cannot be repaired under strict
    plan = pq.read_table(out / "repair_plan.parquet").to_pandas()
    frags = pq.read_table(snapshot / "fragments").to_pandas()
    where = {k: i for i, k in enumerate(zip(frags.ledger_id, frags.segment, strict=True))}
    ensembles = [list(e) for e in frags.ensemble]
    for lid, seg, pos, b in zip(plan.ledger_id, plan.segment, plan.position,
                                plan.bookie_in_index, strict=True):
        ensembles[where[(lid, seg)]][pos] = b
    frags["ensemble"] = ensembles
    repaired = tmp_path / "snapshot"
    for table in ("ledgers", "bookies", "policies", "config"):
        shutil.copytree(snapshot / table, repaired / table)
    write_table(repaired / "fragments",
                pa.Table.from_pandas(frags, schema=TABLES["fragments"], preserve_index=False))
    run_audit(spark, repaired, tmp_path / "out")
    left = verdicts(tmp_path / "out")
    said = dict(zip(zip(unfixable.ledger_id, unfixable.segment, strict=True),
                    unfixable.remaining, strict=True))
    assert left == said


def test_report_renders_offline_in_chromium(audited: tuple[Path, dict[str, Any]],
                                            tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium package is not installed (make system-deps)")
    out, _ = audited
    page = (out / "report.html").read_text()
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,2200"]
    dom = subprocess.run([*flags, "--dump-dom", (out / "report.html").as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert 'data-rendered="5/5"' in dom  # every chart laid out with visible marks
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", (out / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000


@pytest.mark.parametrize("damage, message", [
    ("drop-policies", "table 'policies' is missing"),
    ("ledger-id-as-text", "column 'ledger_id' is string, expected int64"),
])
def test_bad_input_is_a_clear_error(snapshot: Path, tmp_path: Path, damage: str,
                                    message: str) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(snapshot, bad)
    if damage == "drop-policies":
        shutil.rmtree(bad / "policies")
    else:
        t = pq.read_table(bad / "ledgers")
        t = t.set_column(0, "ledger_id", t.column(0).cast(pa.string()))
        shutil.rmtree(bad / "ledgers")
        write_table(bad / "ledgers", t)
    done = subprocess.run([sys.executable, "-m", "pipeline", "audit", "--snapshot", str(bad),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.parametrize("cells", [1 << 23, 16])  # one bitmap, and many small slices
def test_ledgers_per_key_counts_distinct_ledgers(cells: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from pipeline import partitions

    monkeypatch.setattr(partitions, "BITMAP_CELLS", cells)
    rng = np.random.default_rng(3)
    lid = rng.integers(0, 500, 4000) * 7  # unsorted, sparse ids
    key = rng.integers(0, 9, 4000)
    order = np.argsort(lid, kind="stable")
    for ids, keys in ((lid, key), (lid[order], key[order])):  # unsorted, then sorted
        want = np.bincount(np.unique(ids * 9 + keys) % 9, minlength=9)
        got = partitions.ledgers_per_key(partitions.ledger_rank(ids), keys, 9)
        assert got.tolist() == want.tolist()
