"""`GET /admin/v2/bookies/lint`: one warning per problem, with stable kinds."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.routes.test_namespaces import NAMESPACES, make_namespace
from tests.api.routes.test_placement_preview import register, set_rack
from tests.support import RawEtcd, wait_until

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
    wait_until(lambda: admin.get("/admin/v2/bookies/all").json()["bookies"])
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
