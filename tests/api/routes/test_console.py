"""The placement console's extensions (`/admin/v2/console/...`) over HTTP against the real
server and etcd: bookie states in words, namespaces with the bookies they may use, violations
with the placement engine's reasons, a namespace's ledgers, the preview (nothing written) and
its errors in Pulsar's shape; and the console's static assets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.factories import assert_reason, make_namespace, put_ledgers, register, set_rack
from tests.support import RawEtcd, ServerProcess, wait_until

NS = "acme/ns1"
A, B, C, D, E = (f"10.0.0.{i}:3181" for i in range(1, 6))


def put_ledger(raw: RawEtcd, ledger_id: int, topic: str, ensemble: list[str]) -> None:
    metadata = LedgerMetadata(
        ledger_id=ledger_id, ensemble_size=len(ensemble), write_quorum_size=len(ensemble),
        ack_quorum_size=len(ensemble), ensembles={0: tuple(ensemble)}, state=LedgerState.CLOSED,
        custom_metadata=managed_ledger_custom_metadata(topic, None),
    )  # fmt: skip
    raw.put(paths.ledger(ledger_id), encode_ledger_metadata(metadata))


def setup(admin: httpx.Client, raw: RawEtcd) -> None:
    """A and B in group `iso` (two racks), C in `other`, D registered but unplaced, E in the
    rack map but not registered; NS with strict affinity to `iso`, E=Qw=Qa=2; ledger 1 on A
    and B (adheres), ledger 2 on A and C (C is in `other`)."""
    register(raw, A, B, C, D)
    for bookie, rack, group in ((A, "/r1", "iso"), (B, "/r2", "iso"), (C, "/r3", "other"),
                                (E, "/r4", "iso")):
        set_rack(admin, bookie, rack, group)
    make_namespace(admin, raw, NS)
    admin.post(f"/admin/v2/namespaces/{NS}/persistence", json={
        "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
        "managedLedgerMaxMarkDeleteRate": 0}).raise_for_status()
    admin.post(f"/admin/v2/namespaces/{NS}/persistence/bookieAffinity", json={
        "bookkeeperAffinityGroupPrimary": "iso",
        "bookkeeperAffinityGroupStrict": True}).raise_for_status()
    put_ledger(raw, 1, f"{NS}/persistent/t1", [A, B])
    put_ledger(raw, 2, f"{NS}/persistent/t2", [A, C])

    def seen() -> bool:  # the service's watches have delivered the raw writes
        bookies = admin.get("/admin/v2/console/overview").json()["bookies"]
        return {b["id"]: (b["state"], b["ledgers"]) for b in bookies}.get(D) == (
            "registered but unplaced", 0) and len(bookies) == 5 and sum(
            b["ledgers"] for b in bookies) == 4

    wait_until(seen)


def test_overview_states_namespaces_and_violations(admin: httpx.Client, clean_store: RawEtcd
                                                   ) -> None:
    setup(admin, clean_store)
    overview = admin.get("/admin/v2/console/overview").json()
    states = {b["id"]: b["state"] for b in overview["bookies"]}
    assert states == {A: "writable", B: "writable", C: "writable",
                      D: "registered but unplaced", E: "not running"}
    ledgers = {b["id"]: b["ledgers"] for b in overview["bookies"]}
    assert ledgers == {A: 2, B: 1, C: 1, D: 0, E: 0}
    (ns,) = [n for n in overview["namespaces"] if n["name"] == NS]
    assert ns["primary"] == ["iso"] and ns["strict"] is True
    assert (ns["ensembleSize"], ns["writeQuorum"], ns["ackQuorum"]) == (2, 2, 2)
    assert ns["usableBookies"] == [A, B]
    assert (ns["topics"], ns["ledgers"]) == (2, 2)
    (violation,) = overview["violations"]
    assert violation["ledgerId"] == 2 and violation["kinds"] == ["FOREIGN_GROUP"]
    assert violation["reasons"] == [f"{C} is in group 'other', not one of primary ['iso']"]
    assert overview["shortNamespaces"] == []


def test_namespace_ledgers_lists_each_ensemble(admin: httpx.Client, clean_store: RawEtcd
                                               ) -> None:
    setup(admin, clean_store)
    found = admin.get(f"/admin/v2/console/namespaces/{NS}/ledgers").json()
    assert [t["name"] for t in found["topics"]] == [f"{NS}/persistent/t1", f"{NS}/persistent/t2"]
    first = found["topics"][0]["ledgers"][0]
    assert first["ledgerId"] == 1 and first["state"] == "CLOSED"
    assert first["ensembles"] == [{"firstEntry": 0, "bookies": [A, B]}]
    missing = admin.get("/admin/v2/console/namespaces/acme/nope/ledgers")
    assert_reason(missing, 404, "Namespace does not exist")


def test_preview_of_a_bookie_move_writes_nothing(admin: httpx.Client, clean_store: RawEtcd
                                                 ) -> None:
    setup(admin, clean_store)
    before = clean_store.get_json("/bookies")
    preview = admin.post("/admin/v2/console/preview",
                         json={"bookie": {"id": B, "group": "other", "rack": "/r2"}}).json()
    assert (preview["violationsBefore"], preview["violationsAfter"]) == (1, 2)
    assert [v["ledgerId"] for v in preview["newViolations"]] == [1]
    assert preview["newShortNamespaces"] == [
        {"namespace": NS, "usableBookies": 1, "ensembleSize": 2}]
    moving_c = admin.post("/admin/v2/console/preview",
                          json={"bookie": {"id": C, "group": "iso"}}).json()
    assert moving_c["resolvedViolations"] == [2] and moving_c["violationsAfter"] == 0
    assert clean_store.get_json("/bookies") == before


def test_preview_of_namespace_groups(admin: httpx.Client, clean_store: RawEtcd) -> None:
    setup(admin, clean_store)
    body = {"namespace": {"name": NS, "primary": ["iso", "other"], "strict": True}}
    wider = admin.post("/admin/v2/console/preview", json=body).json()
    assert wider["resolvedViolations"] == [2] and wider["newViolations"] == []
    removed = admin.post("/admin/v2/console/preview",
                         json={"namespace": {"name": NS, "primary": []}}).json()
    assert removed["violationsAfter"] == 0  # no groups of its own, none broker-wide


def test_preview_errors_are_pulsars_shape(admin: httpx.Client, clean_store: RawEtcd) -> None:
    setup(admin, clean_store)
    for body, reason in (
        ({}, "Expected one of 'bookie' or 'namespace'"),
        ({"bookie": {"id": A}}, "A bookie change needs 'id' and 'group'"),
        ({"bookie": {"id": A, "group": "g", "rack": 5}}, "'rack' and 'hostname' must be strings"),
        ({"namespace": {"name": "x"}}, "A namespace change needs 'name' as tenant/namespace"),
        ({"namespace": {"name": NS, "primary": "iso"}}, "'primary' must be a list of group names"),
        ({"namespace": {"name": NS, "strict": "yes"}}, "'strict' must be true or false"),
    ):
        assert_reason(admin.post("/admin/v2/console/preview", json=body), 400, reason)
    missing = admin.post("/admin/v2/console/preview", json={"namespace": {"name": "acme/nope"}})
    assert_reason(missing, 404, "Namespace does not exist")


def test_console_assets_are_served(admin: httpx.Client) -> None:
    moved = admin.get("/console", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/console/"
    page = admin.get("/console/")
    assert page.status_code == 200 and "<title>Placement console</title>" in page.text
    assert 'src="console.js"' in page.text and "http" not in page.text.split("<body>")[0]
    script = admin.get("/console/console.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert admin.get("/console/console.css").status_code == 200
    assert admin.get("/console/nothing.js").status_code == 404



def test_region_aware_bookies_carry_their_region(
    clean_store: RawEtcd, etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    server = ServerProcess(etcd.url, tmp_path, extra_conf={
        "bookkeeperClientRegionawarePolicyEnabled": "true",
        "initializeClusterMetadata": "false"}).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            register(clean_store, A, B)
            set_rack(http, A, "/eu/r1", "g")
            set_rack(http, B, "/us/r2", "g")

            def regions() -> dict[str, tuple[str, str]]:
                bookies = http.get("/admin/v2/console/overview").json()["bookies"]
                return {b["id"]: (b["region"], b["rack"]) for b in bookies}

            assert wait_until(lambda: len(regions()) == 2 and regions()) == {
                A: ("eu", "/eu/r1"), B: ("us", "/us/r2")}
    finally:
        server.stop()


def test_the_console_answers_while_the_ledgers_are_read_and_fills_in_after(
    clean_store: RawEtcd, etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    """A service started on 30,000 ledgers answers the overview at once with the topology and
    the namespaces, says how far the read of the ledgers is, and fills in the violations,
    ledger counts and a namespace's ledgers once it is done."""
    register(clean_store, A, B, C)
    count = 30_000
    server = ServerProcess(etcd.url, tmp_path, extra_conf={
        "initializeClusterMetadata": "false"}).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            set_rack(http, A, "/r1", "iso")
            set_rack(http, B, "/r2", "iso")
            set_rack(http, C, "/r3", "other")
            make_namespace(http, clean_store, NS)
            http.post(f"/admin/v2/namespaces/{NS}/persistence/bookieAffinity", json={
                "bookkeeperAffinityGroupPrimary": "iso",
                "bookkeeperAffinityGroupStrict": True}).raise_for_status()
        server.stop()
        put_ledgers(clean_store, count, f"{NS}/persistent/t", [A, C])  # each outside `iso`
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            first = http.get("/admin/v2/console/overview")
            assert first.status_code == 200
            body = first.json()
            status = body["ledgerStatus"]
            assert status["state"] == "reading", status
            assert status["total"] in (None, count) and 0 <= status["read"] <= count
            assert body["violations"] is None
            assert {b["id"]: (b["state"], b["ledgers"]) for b in body["bookies"]} == {
                A: ("writable", None), B: ("writable", None), C: ("writable", None)}
            [ns] = body["namespaces"]
            assert (ns["name"], ns["primary"], ns["strict"], ns["ledgers"], ns["topics"]) == (
                NS, ["iso"], True, None, None)
            assert sorted(ns["usableBookies"]) == [A, B]
            listed = http.get(f"/admin/v2/console/namespaces/{NS}/ledgers").json()
            if listed["ledgerStatus"]["state"] == "reading":
                assert listed["topics"] == []
            refused = http.post("/admin/v2/console/preview", json={
                "bookie": {"id": C, "group": "iso", "rack": "/r3"}})
            if refused.status_code == 503:
                assert "still being read" in refused.json()["reason"]

            def ready() -> dict[str, Any] | None:
                found: dict[str, Any] = http.get("/admin/v2/console/overview").json()
                return found if found["ledgerStatus"]["state"] == "ready" else None

            done = wait_until(ready, timeout=180, interval=0.5)
            assert done["ledgerStatus"] == {"state": "ready", "read": count, "total": count}
            assert len(done["violations"]) == count
            assert done["violations"][0]["kinds"] == ["FOREIGN_GROUP"]
            assert done["namespaces"][0]["ledgers"] == count
            assert {b["id"]: b["ledgers"] for b in done["bookies"]} == {A: count, B: 0, C: count}
            listed = http.get(f"/admin/v2/console/namespaces/{NS}/ledgers").json()
            assert listed["ledgerStatus"]["state"] == "ready"
            assert len(listed["topics"][0]["ledgers"]) == count
    finally:
        server.stop()
