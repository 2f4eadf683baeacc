"""`GET /admin/v2/namespaces/{t}/{ns}/placement`: the dry run on the live topology, over real
etcd and the real server. Bookies register by writing `/ledgers/available/{id}`, as real ones do."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.routes.test_namespaces import NAMESPACES, make_namespace
from tests.support import RawEtcd, wait_until

PREVIEW = f"{NAMESPACES}/acme/ns1/placement"
AFFINITY = f"{NAMESPACES}/acme/ns1/persistence/bookieAffinity"
RACKS = "/admin/v2/bookies/racks-info"
REPEATS = 25


def bookie(i: int) -> str:
    return f"10.0.0.{i}:3181"


def register(store: RawEtcd, *ids: str, read_only: bool = False) -> None:
    for bookie_id in ids:
        base = "/ledgers/available/readonly/" if read_only else "/ledgers/available/"
        store.put(base + bookie_id, b"")


def set_rack(admin: httpx.Client, bookie_id: str, rack: str, group: str) -> None:
    response = admin.post(f"{RACKS}/{bookie_id}", params={"group": group}, json={"rack": rack})
    assert response.status_code == 204, response.text


def preview(admin: httpx.Client, **sizes: int) -> httpx.Response:
    return admin.get(PREVIEW, params=sizes)


def chosen(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    ensemble: list[dict[str, Any]] = response.json()["ensemble"]
    return ensemble


def registered_everywhere(admin: httpx.Client, count: int) -> None:
    """Wait until the server's watch has seen `count` writable bookies (E=1 preview lists
    every other writable one as excluded)."""
    wait_until(lambda: len(chosen(admin.get(PREVIEW, params={
        "ensembleSize": 1, "writeQuorum": 1, "ackQuorum": 1}))) == 1 and len(
        admin.get(PREVIEW, params={"ensembleSize": 1, "writeQuorum": 1, "ackQuorum": 1})
        .json()["excluded"]) == count - 1)  # fmt: skip


def seed(admin: httpx.Client, store: RawEtcd, *, strict: bool) -> None:
    """Bookies 1-5 in group `default`, 6-10 in `share` (racks r1..r3), 11-15 registered
    without rack info; namespace acme/ns1 with primary group `share`."""
    make_namespace(admin, store)
    register(store, *(bookie(i) for i in range(1, 16)))
    for i in range(1, 11):
        set_rack(admin, bookie(i), f"/r{i % 3}", "default" if i <= 5 else "share")
    body: dict[str, Any] = {"bookkeeperAffinityGroupPrimary": "share"}
    if strict:
        body["bookkeeperAffinityGroupStrict"] = True
    assert admin.post(AFFINITY, json=body).status_code == 204
    registered_everywhere(admin, 15)


def test_strict_never_picks_ungrouped_or_other_groups(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    seed(admin, clean_store, strict=True)
    share = {bookie(i) for i in range(6, 11)}
    for _ in range(REPEATS):
        ensemble = chosen(preview(admin, ensembleSize=5, writeQuorum=3, ackQuorum=2))
        assert {b["bookieId"] for b in ensemble} == share
        assert {(b["group"], b["source"]) for b in ensemble} == {("share", "primary")}
    body = preview(admin, ensembleSize=3, writeQuorum=3, ackQuorum=2).json()
    excluded = {e["bookieId"]: e["reason"] for e in body["excluded"]}
    assert all(bookie(i) in excluded for i in (*range(1, 6), *range(11, 16)))
    assert "ungrouped" in excluded[bookie(11)]
    assert "default" in excluded[bookie(1)]
    assert body["policy"]["isolation"] == {"primary": ["share"], "secondary": [], "strict": True}


def test_strict_short_group_is_412_naming_the_group_and_shortfall(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    seed(admin, clean_store, strict=True)
    response = preview(admin, ensembleSize=6, writeQuorum=3, ackQuorum=2)
    assert response.status_code == 412
    reason = response.json()["reason"]
    assert "'share'" in reason
    assert "has 5, needs 6 (short by 1)" in reason


def test_non_strict_falls_back_to_ungrouped_bookies(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    seed(admin, clean_store, strict=False)
    ungrouped = {bookie(i) for i in range(11, 16)}
    for _ in range(REPEATS):
        ensemble = chosen(preview(admin, ensembleSize=6, writeQuorum=3, ackQuorum=2))
        ids = {b["bookieId"] for b in ensemble}
        assert len(ids) == 6
        assert ids & ungrouped  # share has 5: the fallback admits the ungrouped bookies
        assert not ids & {bookie(i) for i in range(1, 6)}  # never another group's
        for b in ensemble:
            expected = "ungrouped" if b["bookieId"] in ungrouped else "primary"
            assert b["source"] == expected


def test_thirteen_bookies_in_four_racks_span_three_racks(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    ids = [bookie(i) for i in range(1, 14)]
    register(clean_store, *ids)
    for i, bookie_id in enumerate(ids):
        set_rack(admin, bookie_id, f"/rack-{i % 4}", "default")
    registered_everywhere(admin, 13)
    for _ in range(REPEATS):
        response = preview(admin, ensembleSize=3, writeQuorum=3, ackQuorum=2)
        ensemble = chosen(response)
        assert len({b["rack"] for b in ensemble}) == 3
        assert {b["source"] for b in ensemble} == {"any"}
        assert response.json()["adherence"] == "MEETS_STRICT"


def test_rack_change_is_in_the_next_preview_without_restart(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register(clean_store, bookie(1), bookie(2), bookie(3))
    for i in (1, 2):
        set_rack(admin, bookie(i), f"/r{i}", "share")
    set_rack(admin, bookie(3), "/r3", "default")
    admin.post(AFFINITY, json={"bookkeeperAffinityGroupPrimary": "share",
                               "bookkeeperAffinityGroupStrict": True})  # fmt: skip
    registered_everywhere(admin, 3)
    ensemble = chosen(preview(admin, ensembleSize=2, writeQuorum=2, ackQuorum=2))
    assert {b["bookieId"] for b in ensemble} == {bookie(1), bookie(2)}

    set_rack(admin, bookie(2), "/r2", "default")  # leaves `share`: now one short
    assert preview(admin, ensembleSize=2, writeQuorum=2, ackQuorum=2).status_code == 412
    set_rack(admin, bookie(3), "/r9", "share")
    ensemble = chosen(preview(admin, ensembleSize=2, writeQuorum=2, ackQuorum=2))
    assert {(b["bookieId"], b["rack"]) for b in ensemble} == {(bookie(1), "/r1"),
                                                               (bookie(3), "/r9")}  # fmt: skip


def test_registration_changes_reach_the_preview(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    register(clean_store, bookie(1))
    wait_until(lambda: preview(admin, ensembleSize=1, writeQuorum=1, ackQuorum=1)
               .status_code == 200)  # fmt: skip
    assert preview(admin, ensembleSize=2, writeQuorum=2, ackQuorum=1).status_code == 412
    register(clean_store, bookie(2), read_only=True)  # read-only bookies are not candidates
    register(clean_store, bookie(3))
    ensemble = wait_until(lambda: chosen(preview(admin, ensembleSize=2, writeQuorum=2,
                                                 ackQuorum=1)))  # fmt: skip
    assert {b["bookieId"] for b in ensemble} == {bookie(1), bookie(3)}
    clean_store.delete(f"/ledgers/available/{bookie(3)}")
    wait_until(lambda: preview(admin, ensembleSize=2, writeQuorum=2, ackQuorum=1)
               .status_code == 412)  # fmt: skip


def test_sizes_default_to_persistence_then_broker_defaults(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    register(clean_store, *(bookie(i) for i in range(1, 5)))
    registered_everywhere(admin, 4)
    policy = admin.get(PREVIEW).json()["policy"]
    assert (policy["ensembleSize"], policy["writeQuorum"], policy["ackQuorum"]) == (2, 2, 2)
    persistence = {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1,
                   "managedLedgerMaxMarkDeleteRate": 0.0}  # fmt: skip
    assert admin.post(f"{NAMESPACES}/acme/ns1/persistence", json=persistence).status_code == 204
    body = admin.get(PREVIEW).json()
    assert (body["policy"]["ensembleSize"], body["policy"]["writeQuorum"],
            body["policy"]["ackQuorum"]) == (3, 2, 1)  # fmt: skip
    assert len(body["ensemble"]) == 3
    policy = admin.get(PREVIEW, params={"ensembleSize": 4}).json()["policy"]
    assert (policy["ensembleSize"], policy["writeQuorum"]) == (4, 2)


def test_invalid_sizes_are_400(admin: httpx.Client, clean_store: RawEtcd) -> None:
    make_namespace(admin, clean_store)
    for sizes, text in (
        ({"ensembleSize": 0, "writeQuorum": 0, "ackQuorum": 0}, "must be > 0"),
        ({"ensembleSize": 2, "writeQuorum": 3, "ackQuorum": 2}, "less than write quorum"),
        ({"ensembleSize": 3, "writeQuorum": 2, "ackQuorum": 3}, "less than ack quorum"),
        ({"ensembleSize": -1}, "must be > 0"),
    ):
        response = admin.get(PREVIEW, params=sizes)
        assert response.status_code == 400, sizes
        assert text in response.json()["reason"]


def test_unknown_namespace_is_404(admin: httpx.Client) -> None:
    response = admin.get(f"{NAMESPACES}/nope/nope/placement")
    assert (response.status_code, response.json()) == (404, {"reason": "Namespace does not exist"})


def test_sizes_beyond_the_maximums_and_the_bookies_are_400(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store)
    for sizes in ({"ensembleSize": 3_000_000}, {"ensembleSize": 2**31 - 1, "writeQuorum": 2},
                  {"ensembleSize": 2**40}, {"ackQuorum": 10**30}):  # fmt: skip
        response = admin.get(PREVIEW, params=sizes)
        assert response.status_code == 400, sizes
        assert "reason" in response.json()
