"""Decommission of bookies (`DELETE /admin/v2/storage/bookies/{bookie}`,
`pulsar-admin storage decommission --wait`) on a service supervising four real bookie
processes: one that finishes (every fragment moved inside the ledgers' groups, entries read
back, the bookie gone), and one in a strict group with no spare bookie that reports the reason,
writes nothing outside the group, survives a restart of the service and finishes once the
group gets a bookie."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import decode_ledger_metadata
from placement import AffinityGroups
from storage.bookie.errors import NoLedger
from storage.bookie_client import BookieClient
from tests.cli.conftest import run_cli
from tests.factories import delete_ledgers, ledger_client, read_all, write_ledgers
from tests.support import RawEtcd, ServerProcess, wait_until

BOOKIES = "/admin/v2/storage/bookies"
CONF = {"openLedgerRereplicationGracePeriod": "500", "rwRereplicateBackoffMs": "300",
        "metadataStoreSessionTimeoutMillis": "2000"}


@dataclass
class Service:
    server: ServerProcess
    etcd: EmbeddedEtcd
    raw: RawEtcd
    data: Path

    def ids(self) -> list[str]:
        with httpx.Client(base_url=self.server.url, timeout=30) as http:
            return sorted(b["id"] for b in http.get(BOOKIES).json() if b["supervised"])

    def set_groups(self, groups: dict[str, list[str]]) -> None:
        self.raw.put("/bookies", json.dumps({
            group: {b: {"rack": f"/r{b.rpartition(':')[2]}"} for b in members}
            for group, members in groups.items()}))

    def ensembles(self) -> dict[int, list[tuple[str, ...]]]:
        out = {}
        for key, value in self.raw.snapshot().items():
            ledger_id = paths.ledger_id_of(key)
            if ledger_id is not None:
                out[ledger_id] = list(decode_ledger_metadata(ledger_id, value).ensembles
                                      .values())
        return out


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    work = tmp_path_factory.mktemp("decom")
    etcd = EmbeddedEtcd(work / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, work / "service", extra_conf=CONF,
                           extra_args=["--bookies", "4", "--bookie-port", "0",
                                       "--data-dir", str(work / "data")])  # fmt: skip
    try:
        server.start()
        running = Service(server, etcd, RawEtcd(etcd.endpoint), work / "data")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_until(lambda: len(http.get("/api/v1/bookie/list_bookies",
                                            params={"type": "rw"}).json()) == 4,
                       30)
        yield running
    finally:
        server.stop()
        etcd.stop()


def listening(bookie_id: str) -> bool:
    host, _, port = bookie_id.rpartition(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def status_of(service: Service, bookie: str) -> dict[str, Any]:
    with httpx.Client(base_url=service.server.url, timeout=30) as http:
        got = http.get(f"{BOOKIES}/{bookie}/decommission")
        assert got.status_code == 200, got.text
        return dict(got.json())


def test_decommission_moves_everything_inside_the_group_then_removes_the_bookie(
    service: Service,
) -> None:
    ids = service.ids()
    assert len(ids) == 4
    service.set_groups({"dc": ids})
    groups = AffinityGroups(("dc",), strict=True)
    written = asyncio.run(write_ledgers(service.etcd.url, groups, (2, 2, 2), 6, leave_open=1))
    holding = {lid for lid, ens in service.ensembles().items() if lid in written}
    counts = {b: sum(1 for lid in holding if any(b in e for e in service.ensembles()[lid]))
              for b in ids}
    opened = max(written)  # the OPEN ledger: recovered and closed after the grace period
    victim = max(service.ensembles()[opened][0], key=lambda b: counts[b])
    assert counts[victim] >= 2

    with httpx.Client(base_url=service.server.url, timeout=30) as http:
        assert http.get(f"{BOOKIES}/{victim}/decommission").status_code == 404
        unknown = http.delete(f"{BOOKIES}/10.0.0.1:1")
        assert unknown.status_code == 404 and "does not exist" in unknown.json()["reason"]
    done = run_cli("--admin-url", service.server.url, "storage", "decommission", victim,
                   "--wait", "--timeout", "60", timeout=90)
    assert done.code == 0, done.err
    final = json.loads(done.out)
    assert final["state"] == "DONE" and final["stuck"] == {}
    assert final["ledgersMoved"] == counts[victim] == final["ledgersTotal"]
    assert final["ledgersRemaining"] == 0
    assert "100%" in done.err and "ledgers moved" in done.err
    async def closed() -> bool:
        async with ledger_client(service.etcd.url) as client:
            return (await client.read_metadata(opened)).is_closed

    assert asyncio.run(closed())

    ensembles = service.ensembles()
    for ledger_id in written:
        for ensemble in ensembles[ledger_id]:
            assert victim not in ensemble
            assert set(ensemble) <= set(ids) - {victim}
    assert asyncio.run(read_all(service.etcd.url, written)) == written
    # removed: not running, not registered, no rack entry, not listed, data kept aside
    assert not listening(victim)
    assert service.raw.get(paths.bookie_available(victim)) is None
    assert service.raw.get(paths.bookie_readonly(victim)) is None
    assert victim not in json.dumps(service.raw.get_json("/bookies"))
    assert victim not in service.ids()
    port = victim.rpartition(":")[2]
    assert (service.data / f"bookie-{port}.decommissioned").is_dir()
    assert status_of(service, victim)["state"] == "DONE"


def test_strict_group_without_spare_reports_the_reason_and_resumes_after_restart(
    service: Service,
) -> None:
    asyncio.run(delete_ledgers(service.etcd.url, list(service.ensembles())))  # the earlier test's
    ids = service.ids()
    assert len(ids) >= 3
    share, spare = ids[:2], ids[2]
    service.set_groups({"share": share, "other": [spare, *ids[3:]]})
    written = asyncio.run(write_ledgers(service.etcd.url, AffinityGroups(("share",), strict=True),
                                        (2, 2, 2), 2))
    victim = share[0]
    with httpx.Client(base_url=service.server.url, timeout=30) as http:
        # BookKeeper's own HTTP path starts it (bare text answers, as upstream)
        upstream = "/api/v1/autorecovery/decommission"
        missing = http.put(upstream, json={"bookie": victim})
        assert (missing.status_code, missing.text) == (404, "Request body not contains "
                                                             "bookie_src.")
        started = http.put(upstream, json={"bookie_src": victim})
        assert started.status_code == 200, started.text
        assert started.text == f"Success send decommission Bookie command {victim}"
        again = http.delete(f"{BOOKIES}/{victim}")
        assert again.status_code == 409 and "already being" in again.json()["reason"]

    def blocked() -> dict[str, Any] | None:
        got = status_of(service, victim)
        return got if got["state"] == "BLOCKED" and len(got["stuck"]) == len(written) else None

    try:
        status = wait_until(blocked, timeout=30, interval=0.2)
    except AssertionError:
        raise AssertionError(status_of(service, victim)) from None
    assert status["ledgersRemaining"] == len(written) and status["ledgersMoved"] == 0
    for reason in status["stuck"].values():
        assert reason.startswith("strict group 'share' has no other writable bookie")
    # read-only, nothing written outside the group, ensembles unchanged
    assert service.raw.get(paths.bookie_readonly(victim)) is not None
    assert all(ens == [tuple(share)] or set(ens[0]) == set(share)
               for lid, ens in service.ensembles().items() if lid in written)

    async def outside_has_nothing() -> None:
        for outsider in ids[2:]:
            async with await BookieClient.connect(outsider) as connection:
                for ledger_id in written:
                    with pytest.raises(NoLedger):
                        await connection.read(ledger_id, -1)

    asyncio.run(outside_has_nothing())
    blocked_cli = run_cli("--admin-url", service.server.url, "storage", "decommission-status",
                          victim)
    assert blocked_cli.code == 0 and "'share'" in blocked_cli.out

    # the state is in etcd: a restarted service shows it and carries on
    service.server.stop()
    service.server.start()
    assert status_of(service, victim)["state"] in ("BLOCKED", "RUNNING")
    service.set_groups({"share": [*share, spare], "other": ids[3:]})  # the group grows

    def finished() -> dict[str, Any] | None:
        got = status_of(service, victim)
        return got if got["state"] == "DONE" else None

    final = wait_until(finished, timeout=60, interval=0.3)
    assert final["ledgersMoved"] == len(written) and final["stuck"] == {}
    for ledger_id in written:
        for ensemble in service.ensembles()[ledger_id]:
            assert victim not in ensemble and set(ensemble) <= {share[1], spare}
    assert asyncio.run(read_all(service.etcd.url, written)) == written
