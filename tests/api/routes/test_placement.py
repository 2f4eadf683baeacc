"""The extensions of api/routes/placement.py over real etcd and the real server:
`GET /admin/v2/namespaces/{t}/{ns}/placement` (the dry run on the live topology) and
`GET /admin/v2/bookies/lint` (one warning per problem, with stable kinds). Bookies register
by writing `/ledgers/available/{id}`, as real ones do."""

from __future__ import annotations

from typing import Any

import httpx

from tests.factories import NAMESPACES, make_namespace, register, set_rack
from tests.support import RawEtcd, wait_until

PREVIEW = f"{NAMESPACES}/acme/ns1/placement"
AFFINITY = f"{NAMESPACES}/acme/ns1/persistence/bookieAffinity"
REPEATS = 25


def bookie(i: int) -> str:
    return f"10.0.0.{i}:3181"


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


# -- GET /admin/v2/bookies/lint ------------------------------------------------------------

LINT = "/admin/v2/bookies/lint"


def warnings(admin: httpx.Client) -> list[dict[str, Any]]:
    response = admin.get(LINT)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["warnings"]
    return found


def of_kind(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [w for w in found if w["kind"] == kind]


def test_clean_configuration_has_no_warnings(admin: httpx.Client, clean_store: RawEtcd) -> None:
    assert warnings(admin) == []
    register(clean_store, "b1:3181", "b2:3181")
    set_rack(admin, "b1:3181", "/r1", "default")
    set_rack(admin, "b2:3181", "/r2", "default")
    wait_until(lambda: admin.get("/api/v1/bookie/list_bookies", params={"type": "rw"}).json())
    assert wait_until(lambda: warnings(admin) == [])


def test_unracked_stale_and_bad_ids(admin: httpx.Client, clean_store: RawEtcd) -> None:
    register(clean_store, "b1:3181", "b2:3181", "b3:3181", "bk-no-port")
    set_rack(admin, "b1:3181", "/r1", "default")
    set_rack(admin, "b2:3181", "/r2", "default")
    set_rack(admin, "gone:3181", "/r3", "ssd")  # rack entry for a bookie never registered
    found = wait_until(lambda: (lambda w: w if of_kind(w, "invalid-bookie-id") else None)(
        warnings(admin)))  # fmt: skip
    assert of_kind(found, "unracked-bookie") == [
        {"kind": "unracked-bookie", "bookieId": "b3:3181",
         "message": "Bookie b3:3181 is registered but has no rack information; it is placed on "
                    "/default-rack"},
        {"kind": "unracked-bookie", "bookieId": "bk-no-port",
         "message": "Bookie bk-no-port is registered but has no rack information; it is placed "
                    "on /default-rack"},
    ]  # fmt: skip
    assert of_kind(found, "unregistered-rack-entry") == [
        {"kind": "unregistered-rack-entry", "bookieId": "gone:3181", "group": "ssd",
         "message": "Rack map lists bookie gone:3181 (group 'ssd') but it is not registered"},
    ]  # fmt: skip
    assert [w["bookieId"] for w in of_kind(found, "invalid-bookie-id")] == ["bk-no-port"]
    assert "namespace" not in found[0] and "group" not in found[0]  # absent keys omitted


def test_depth_mismatch_default_rack_and_too_few_racks(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    register(clean_store, "b1:3181", "b2:3181")
    # Hand-written rack map (the API refuses these racks): depth 2 in rack-aware mode, and a
    # rack of "/" that resolves to the default rack.
    clean_store.put("/bookies", {"default": {"b1:3181": {"rack": "/region/rack"},
                                             "b2:3181": {"rack": "/"}}})  # fmt: skip
    found = wait_until(lambda: (lambda w: w if of_kind(w, "rack-depth-mismatch") else None)(
        warnings(admin)))  # fmt: skip
    [depth] = of_kind(found, "rack-depth-mismatch")
    assert (depth["bookieId"], depth["group"]) == ("b1:3181", "default")
    assert "/region/rack" in depth["message"] and "rack-aware" in depth["message"]
    [default] = of_kind(found, "default-rack")
    assert default["bookieId"] == "b2:3181"
    assert default["message"] == (
        "Bookie b2:3181 has no rack and resolves to the default rack /default-rack"
    )
    [racks] = of_kind(found, "too-few-racks")
    assert racks == {
        "kind": "too-few-racks",
        "message": "Writable bookies span 1 rack(s), fewer than "
        "bookkeeperClientMinNumRacksPerWriteQuorum=2",
    }


def test_affinity_groups_empty_or_smaller_than_the_ensemble(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    make_namespace(admin, clean_store, "acme/small")
    make_namespace(admin, clean_store, "acme/empty")
    make_namespace(admin, clean_store, "acme/fine")
    register(clean_store, "b1:3181", "b2:3181", "b3:3181")
    set_rack(admin, "b1:3181", "/r1", "share")
    set_rack(admin, "b2:3181", "/r2", "big")
    set_rack(admin, "b3:3181", "/r3", "big")
    persistence = {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
                   "managedLedgerMaxMarkDeleteRate": 0.0}  # fmt: skip
    for name, group in (("small", "share"), ("empty", "nothing"), ("fine", "big")):
        assert admin.post(f"{NAMESPACES}/acme/{name}/persistence", json=persistence
                          ).status_code == 204  # fmt: skip
        affinity = {"bookkeeperAffinityGroupPrimary": group}
        assert admin.post(f"{NAMESPACES}/acme/{name}/persistence/bookieAffinity",
                          json=affinity).status_code == 204  # fmt: skip
    found = wait_until(lambda: (lambda w: w if of_kind(w, "affinity-group-too-small") else None)(
        warnings(admin)))  # fmt: skip
    assert of_kind(found, "empty-affinity-group") == [
        {"kind": "empty-affinity-group", "group": "nothing", "namespace": "acme/empty",
         "message": "Namespace acme/empty uses bookie affinity group 'nothing', which has no "
                    "bookies"},
    ]  # fmt: skip
    assert of_kind(found, "affinity-group-too-small") == [
        {"kind": "affinity-group-too-small", "group": "share", "namespace": "acme/small",
         "message": "Namespace acme/small: primary group 'share' has 1 writable bookie(s), "
                    "fewer than its ensemble size 2"},
    ]  # fmt: skip
    assert not [w for w in found if w.get("namespace") == "acme/fine"]


def test_kinds_are_documented_in_the_route_description(admin: httpx.Client) -> None:
    operation = admin.get("/openapi.json").json()["paths"]["/admin/v2/bookies/lint"]["get"]
    for kind in ("unracked-bookie", "unregistered-rack-entry", "invalid-bookie-id",
                 "rack-depth-mismatch", "empty-affinity-group", "affinity-group-too-small",
                 "too-few-racks", "default-rack"):  # fmt: skip
        assert f"`{kind}`" in operation["description"]
    assert operation["tags"] == ["extensions"]
