"""Applying an audit's repair plan on a live cluster: a service supervising four bookie
processes, strict ledgers in group `iso` (three bookies), then one of them moved to another
group. The audit (snapshot of that etcd, Spark on the session's shared SparkSession, written
where the service keeps its audits) plans the moves; `pulsar-admin storage audit-repair --wait`
applies them through the replication workers; a second audit finds exactly the fragments the
plan said it could not fix, and every entry reads back. The second audit is the plain one
(`pipeline.plain`, the same scalar rules without Spark): one Spark run is minutes on the
shared machine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import decode_ledger_metadata
from pipeline.plain import plain_audit
from pipeline.snapshot import snapshot
from placement import AffinityGroups, PlacementConfig
from tests.cli.conftest import run_cli
from tests.factories import read_all, write_ledgers
from tests.support import RawEtcd, ServerProcess, wait_until

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ServerProcess, EmbeddedEtcd, Path]]:
    work = tmp_path_factory.mktemp("repair")
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, work / "service",
                           extra_args=["--bookies", "4", "--bookie-port", "0",
                                       "--data-dir", str(work / "data")])  # fmt: skip
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_until(lambda: len(http.get("/api/v1/bookie/list_bookies",
                                            params={"type": "rw"}).json()) == 4, 30)
        yield server, etcd, work / "data"
    finally:
        server.stop()
        etcd.stop()


def audit(spark: Any, url: str, out: Path) -> dict[int, set[int]]:
    """Snapshot and Spark audit into `out` (`snapshot/`, `audit/`, as the service lays an
    audit out); ledger -> violating segments."""
    from pipeline.audit import run_audit

    asyncio.run(snapshot(url, out / "snapshot", PlacementConfig.from_broker_conf({})))
    run_audit(spark, out / "snapshot", out / "audit")
    rows = ds.dataset(out / "audit" / "fragment_verdicts", format="parquet").to_table(
    ).to_pylist()
    found: dict[int, set[int]] = {}
    for row in rows:
        if row["violations"]:
            found.setdefault(row["ledger_id"], set()).add(row["segment"])
    return found


def reaudit(url: str, out: Path) -> dict[int, set[int]]:
    """The same rules without Spark (the plain audit, `pipeline.plain`) on a new snapshot."""
    asyncio.run(snapshot(url, out, PlacementConfig.from_broker_conf({})))
    found: dict[int, set[int]] = {}
    for (ledger_id, segment), bits in plain_audit(out).items():
        if bits:
            found.setdefault(ledger_id, set()).add(segment)
    return found


@pytest.mark.slow
def test_repair_plan_applied_leaves_only_what_it_could_not_fix(
    service: tuple[ServerProcess, EmbeddedEtcd, Path], spark: Any,
) -> None:
    server, etcd, data = service
    raw = RawEtcd(etcd.endpoint)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ids = sorted(b["id"] for b in http.get("/admin/v2/storage/bookies").json())
        # the namespace of the ledgers (`t/ns`, tests.factories.write_ledgers): strict `iso`
        http.put("/admin/v2/tenants/t", json={"allowedClusters": ["test"]}).raise_for_status()
        http.put("/admin/v2/namespaces/t/ns").raise_for_status()
        http.post("/admin/v2/namespaces/t/ns/persistence/bookieAffinity", json={
            "bookkeeperAffinityGroupPrimary": "iso",
            "bookkeeperAffinityGroupStrict": True}).raise_for_status()
    iso, other = ids[:3], ids[3:]

    def set_groups(groups: dict[str, list[str]]) -> None:
        raw.put("/bookies", json.dumps({g: {b: {"rack": f"/r{b.rpartition(':')[2]}"}
                                            for b in members}
                                        for g, members in groups.items()}))

    set_groups({"iso": iso, "other": other})
    strict = AffinityGroups(("iso",), strict=True)
    written = asyncio.run(write_ledgers(etcd.url, strict, (2, 2, 2), 5))
    # E=3 in a group that will have two bookies: the plan cannot fix it
    written |= asyncio.run(write_ledgers(etcd.url, strict, (3, 3, 2), 1))
    wide = max(written)

    def ensembles() -> dict[int, tuple[str, ...]]:
        out = {}
        for ledger_id in written:
            value = raw.get(paths.ledger(ledger_id))
            assert value is not None
            out[ledger_id] = decode_ledger_metadata(ledger_id, value).ensembles[0]
        return out

    moved = max(iso, key=lambda b: sum(b in e for e in ensembles().values()))
    set_groups({"iso": [b for b in iso if b != moved], "other": [*other, moved]})
    expected = {lid for lid, e in ensembles().items() if moved in e}
    assert wide in expected and len(expected) >= 2

    audit_id = "a1b2c3d4e5f6"
    first = audit(spark, etcd.url, data / "audits" / audit_id)
    assert set(first) == expected
    plan = pq.read_table(data / "audits" / audit_id / "audit" / "repair_plan.parquet")
    unfixable = pq.read_table(data / "audits" / audit_id / "audit" / "unfixable.parquet")
    assert set(unfixable.column("ledger_id").to_pylist()) == {wide}
    assert set(plan.column("bookie_out").to_pylist()) == {moved}

    done = run_cli("--admin-url", server.url, "storage", "audit-repair", audit_id, "--wait",
                   "--timeout", "60", timeout=90)
    assert done.code == 0, done.err
    repair = json.loads(done.out)
    assert repair["state"] == "DONE" and repair["failed"] == []
    assert repair["applied"] == plan.num_rows - len(repair["skipped"]) > 0
    assert repair["unfixableFragments"] == 1 and "100%" in done.err
    with httpx.Client(base_url=server.url, timeout=30) as http:
        status = http.get(f"/admin/v2/storage/audit/{audit_id}").json()
        assert status["repair"]["applied"] == repair["applied"]
        again = http.post(f"/admin/v2/storage/audit/{audit_id}/repair")
        assert again.status_code == 202  # a second run finds every move stale
        wait_until(lambda: http.get(f"/admin/v2/storage/audit/{audit_id}").json()["repair"][
            "state"] == "DONE", timeout=30, interval=0.2)
        second = http.get(f"/admin/v2/storage/audit/{audit_id}").json()["repair"]
        assert second["applied"] == 0 and len(second["skipped"]) == plan.num_rows
        assert all("holds" in s["reason"] or "already" in s["reason"]
                   for s in second["skipped"])

    after = ensembles()
    allowed = set(iso) - {moved}
    for ledger_id in expected - {wide}:
        assert set(after[ledger_id]) <= allowed
    assert moved in after[wide]
    assert reaudit(etcd.url, data / "reaudit") == {wide: {0}}
    assert asyncio.run(read_all(etcd.url, written)) == written
