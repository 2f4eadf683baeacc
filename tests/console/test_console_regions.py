"""The placement console in a real headless Chromium against a service (no bookie processes)
whose rack map nests racks in regions or zones: the region and zone areas with their labels, a
bookie in the rack map that never registered shown "not running" in words, and a service
started on 30,000 ledgers (40 ensembles each) showing the topology and the namespaces at once,
the read's progress in words, and the violations and ledger counts once every ledger is
read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from tests.console.conftest import open_page
from tests.factories import put_ledgers, register
from tests.support import RawEtcd, ServerProcess

A, B, C, D = (f"10.0.1.{i}:3181" for i in range(1, 5))
NS = "acme/ns1"
LEDGERS = 30_000
SEGMENTS = 40  # ensembles per ledger: a read that lasts long enough to be seen


def seed(raw: RawEtcd, racks: dict[str, tuple[str, str]], ledgers: int, segments: int
         ) -> None:
    """A, B and C registered, D only in the rack map; namespace NS with strict affinity to
    `iso`, E=Qw=Qa=2; `ledgers` ledgers of `segments` ensembles on A and C (C is in
    `other`: each one a violation)."""
    register(raw, A, B, C)
    rack_map: dict[str, dict[str, Any]] = {}
    for bookie, (rack, group) in racks.items():
        rack_map.setdefault(group, {})[bookie] = {"rack": rack, "hostname": f"host-{bookie[7]}"}
    raw.put(paths.BOOKIES_RACK_CONFIG, rack_map)
    raw.put("/admin/policies/acme", {"adminRoles": [], "allowedClusters": ["test"]})
    raw.put(f"/admin/policies/{NS}", {
        "persistence": {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2,
                        "bookkeeperAckQuorum": 2, "managedLedgerMaxMarkDeleteRate": 0},
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}})
    raw.put(f"/admin/local-policies/{NS}", json.dumps({"bookieAffinityGroup": {
        "bookkeeperAffinityGroupPrimary": "iso", "bookkeeperAffinityGroupStrict": True}}))
    put_ledgers(raw, ledgers, f"{NS}/persistent/t", [A, C], segments)


@contextmanager
def service(tmp_path: Path, conf: dict[str, str], racks: dict[str, tuple[str, str]],
            ledgers: int, segments: int = 1) -> Iterator[str]:
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, tmp_path / "service", cluster_name="test",
                           extra_conf={"initializeClusterMetadata": "false", **conf})
    try:
        seed(RawEtcd(etcd.endpoint), racks, ledgers, segments)
        server.start()
        yield server.url
    finally:
        server.stop()
        etcd.stop()


def tile(page: Any, bookie: str) -> Any:
    return page.locator(f'.tile[data-bookie="{bookie}"]')


def test_regions_nest_racks_and_the_ledgers_fill_in_after_the_read(
    browser: Any, tmp_path: Path
) -> None:
    racks = {A: ("/eu/r1", "iso"), B: ("/us/r2", "iso"), C: ("/eu/r3", "other"),
             D: ("/us/r4", "iso")}
    conf = {"bookkeeperClientRegionawarePolicyEnabled": "true"}
    with service(tmp_path, conf, racks, LEDGERS, SEGMENTS) as url, \
            open_page(browser, url) as watched:
        page = watched.open()
        # at once: the topology and the namespaces, and the read's progress in words
        summary = page.locator("#violation-summary")
        expect(summary).to_contain_text("The ledgers are still being read (", timeout=15_000)
        expect(summary).to_contain_text(f"of {LEDGERS:,}")
        expect(tile(page, A)).to_contain_text("ledgers being read")
        row = page.locator(f'tr[data-namespace="{NS}"]')
        expect(row).to_contain_text("strict")
        expect(row).to_contain_text("being read")
        eu = page.get_by_role("group", name="Region eu", exact=True)
        us = page.get_by_role("group", name="Region us", exact=True)
        expect(eu.get_by_role("group", name="rack /eu/r1")).to_contain_text(A)
        expect(eu.get_by_role("group", name="rack /eu/r3")).to_contain_text(C)
        expect(us.get_by_role("group", name="rack /us/r2")).to_contain_text(B)
        # in the rack map, never registered: "not running", in words
        expect(tile(page, D).locator(".state")).to_have_text("not running")
        expect(tile(page, B).locator(".state")).to_have_text("writable")
        page.get_by_role("button", name=NS).click()
        expect(page.locator("#namespace-ledgers")).to_contain_text(
            "The ledgers are still being read")
        # once read: the violations, the counts and the namespace's ledgers
        expect(summary).to_contain_text(f"{LEDGERS} ledgers break", timeout=180_000)
        expect(tile(page, A)).to_contain_text(f"{LEDGERS} ledgers")
        expect(tile(page, B)).to_contain_text("0 ledgers")
        expect(row).to_contain_text(str(LEDGERS))
        expect(page.locator("#namespace-ledgers")).to_contain_text(
            f"Topic {NS}/persistent/t · {LEDGERS} ledgers", timeout=30_000)
        assert not watched.unexpected_errors() and not watched.foreign


def test_zones_are_labelled_zones(browser: Any, tmp_path: Path) -> None:
    racks = {A: ("/z1/ud1", "iso"), B: ("/z2/ud1", "iso"), C: ("/z1/ud2", "other"),
             D: ("/z3/ud1", "iso")}
    conf = {"bookkeeperClientZoneawarePolicyEnabled": "true"}
    with service(tmp_path, conf, racks, 3) as url, open_page(browser, url) as watched:
        page = watched.open()
        expect(page.locator("#cluster")).to_contain_text("zone-aware")
        for zone, rack, bookie in (("z1", "/z1/ud1", A), ("z2", "/z2/ud1", B),
                                   ("z1", "/z1/ud2", C), ("z3", "/z3/ud1", D)):
            area = page.get_by_role("group", name=f"Zone {zone}", exact=True)
            expect(area.get_by_role("group", name=f"rack {rack}")).to_contain_text(bookie)
        expect(page.get_by_role("group", name="Region z1")).to_have_count(0)
        expect(tile(page, D).locator(".state")).to_have_text("not running")
        expect(page.locator("#violation-summary")).to_contain_text("3 ledgers break")
        assert not watched.unexpected_errors() and not watched.foreign
