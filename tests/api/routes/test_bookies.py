"""`/admin/v2/bookies`: behaviour, status codes and reasons as upstream, JSON as stored."""

from __future__ import annotations

import httpx

from api.services.racks import INVALID_RACK_REASON
from tests.support import RawEtcd
from tests.zookeeper import ON_BOTH_STORES

pytestmark = ON_BOTH_STORES  # the routes on etcd and on ZooKeeper

RACKS = "/admin/v2/bookies/racks-info"


def set_rack(admin: httpx.Client, bookie: str, group: str | None, **info: str) -> httpx.Response:
    params = {} if group is None else {"group": group}
    return admin.post(f"{RACKS}/{bookie}", params=params, json=info)


def test_empty_rack_map_is_an_empty_object(admin: httpx.Client) -> None:
    response = admin.get(RACKS)
    assert response.status_code == 200
    assert response.json() == {}


def test_set_and_get_bookie_rack(admin: httpx.Client, clean_store: RawEtcd) -> None:
    response = set_rack(admin, "127.0.0.1:3181", "default", rack="/rack1", hostname="127.0.0.1")
    assert response.status_code == 204
    assert response.content == b""

    assert admin.get(f"{RACKS}/127.0.0.1:3181").json() == {
        "rack": "/rack1",
        "hostname": "127.0.0.1",
    }
    assert clean_store.get("/bookies") == (
        b'{"default":{"127.0.0.1:3181":{"rack":"/rack1","hostname":"127.0.0.1"}}}'
    )


def test_hostname_is_omitted_when_not_given(admin: httpx.Client, clean_store: RawEtcd) -> None:
    set_rack(admin, "b1:3181", "default", rack="/rack1")
    assert admin.get(f"{RACKS}/b1:3181").json() == {"rack": "/rack1"}
    assert clean_store.get_json("/bookies") == {"default": {"b1:3181": {"rack": "/rack1"}}}


def test_missing_group_is_412_and_writes_nothing(admin: httpx.Client, clean_store: RawEtcd) -> None:
    response = set_rack(admin, "b1:3181", None, rack="/rack1")
    assert response.status_code == 412
    assert response.json() == {"reason": "Bookie 'group' parameters is missing"}
    assert clean_store.get("/bookies") is None


def test_rack_with_inner_slash_is_412_in_rack_mode(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    response = set_rack(admin, "b1:3181", "default", rack="/rack/a")
    assert response.status_code == 412
    assert response.json() == {"reason": INVALID_RACK_REASON}
    assert clean_store.get("/bookies") is None


def test_rack_names_accepted_in_rack_mode(admin: httpx.Client) -> None:
    for rack in ("/rack", "rack1", "/rack1/", "//a//", "", "/"):
        assert set_rack(admin, "b1:3181", "default", rack=rack).status_code == 204, rack


def test_unknown_bookie_is_404(admin: httpx.Client) -> None:
    for response in (admin.get(f"{RACKS}/nope:3181"), admin.delete(f"{RACKS}/nope:3181")):
        assert response.status_code == 404
        assert response.json() == {
            "reason": "Bookie rack placement configuration not found: nope:3181"
        }


def test_moving_a_bookie_removes_it_from_its_old_group(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    set_rack(admin, "b1:3181", "group-a", rack="/r1")
    set_rack(admin, "b2:3181", "default", rack="/r2")
    set_rack(admin, "b1:3181", "group-b", rack="/r3")
    assert admin.get(RACKS).json() == {
        "default": {"b2:3181": {"rack": "/r2"}},
        "group-b": {"b1:3181": {"rack": "/r3"}},
    }
    assert "group-a" not in clean_store.get_json("/bookies")


def test_groups_are_sorted_and_bookies_kept_in_the_order_set(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """BookiesRackConfiguration: a TreeMap of groups, each group as Jackson read it (a
    LinkedHashMap); `updateBookie` takes a bookie out and adds it last."""
    for bookie, group in [("z:1", "zeta"), ("b:1", "alpha"), ("a:1", "alpha"), ("m:1", "mid"),
                          ("c:1", "alpha"), ("b:1", "alpha")]:  # fmt: skip
        set_rack(admin, bookie, group, rack="/r")
    body = admin.get(RACKS).text
    assert body.index('"alpha"') < body.index('"mid"') < body.index('"zeta"')
    assert body.index('"a:1"') < body.index('"c:1"') < body.index('"b:1"')
    stored = clean_store.get_json("/bookies")
    assert list(stored) == ["alpha", "mid", "zeta"]
    assert list(stored["alpha"]) == ["a:1", "c:1", "b:1"]


def test_delete_last_bookie_of_a_group_drops_the_group(admin: httpx.Client) -> None:
    set_rack(admin, "b1:3181", "solo", rack="/r1")
    set_rack(admin, "b2:3181", "default", rack="/r1")
    response = admin.delete(f"{RACKS}/b1:3181")
    assert response.status_code == 204
    assert admin.get(RACKS).json() == {"default": {"b2:3181": {"rack": "/r1"}}}


def test_write_directly_in_etcd_is_seen(admin: httpx.Client, clean_store: RawEtcd) -> None:
    from tests.support import wait_until

    clean_store.put("/bookies", {"g": {"x:1": {"rack": "/rx"}}})
    wait_until(lambda: admin.get(f"{RACKS}/x:1").status_code == 200, timeout=1.0)
    clean_store.put("/bookies", {})
    wait_until(lambda: admin.get(f"{RACKS}/x:1").status_code == 404, timeout=1.0)


def test_all_bookies_lists_every_bookie_with_a_cookie_in_hash_set_order(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """As Pulsar's `getAllBookies`: the bookies with a cookie, running or not (a registration
    without a cookie is not one of them), in Java `HashSet<BookieId>` order."""
    assert admin.get("/admin/v2/bookies/all").json() == {"bookies": []}
    clean_store.put("/ledgers/available/10.0.0.9:3181", b"")  # registered, no cookie
    for bookie in ("127.0.0.1:37911", "127.0.0.1:57753", "10.0.0.1:3181"):
        clean_store.put(f"/ledgers/cookies/{bookie}", b"5\n")
    listed = [b["bookieId"] for b in admin.get("/admin/v2/bookies/all").json()["bookies"]]
    # the order the upstream broker answered for the first two
    assert listed == ["10.0.0.1:3181", "127.0.0.1:57753", "127.0.0.1:37911"]


def test_malformed_rack_document_from_another_tool_reads_as_empty(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    from tests.support import wait_until

    clean_store.put("/bookies", {"g": {"x:1": {"rack": "/rx"}}})
    wait_until(lambda: admin.get(f"{RACKS}/x:1").status_code == 200, timeout=1.0)
    clean_store.put("/bookies", b"not json")
    wait_until(lambda: admin.get(RACKS).json() == {}, timeout=1.0)
    assert admin.get(f"{RACKS}/x:1").status_code == 404
    # A write does not silently replace a document it cannot read.
    response = set_rack(admin, "y:1", "g", rack="/r")
    assert response.status_code == 500
    assert response.json() == {"reason": "Failed to deserialize payload for key '/bookies'"}
    assert clean_store.get("/bookies") == b"not json"
