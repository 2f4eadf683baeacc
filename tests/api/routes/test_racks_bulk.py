"""`PUT /admin/v2/bookies/racks-info`: a whole rack map, validated as a whole, one write."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.support import RawEtcd, wait_until

RACKS = "/admin/v2/bookies/racks-info"


def test_dry_run_reports_the_diff_and_changes_nothing(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    admin.post(f"{RACKS}/a:1", params={"group": "default"}, json={"rack": "/r1"})
    admin.post(f"{RACKS}/b:1", params={"group": "default"}, json={"rack": "/r2"})
    before = clean_store.snapshot()
    document = {"default": {"a:1": {"rack": "/r1"}}, "ssd": {"c:1": {"rack": "/r3"}},
                "other": {"b:1": {"rack": "/r2"}}}  # fmt: skip
    response = admin.put(RACKS, params={"dryRun": "true", "prune": "true"}, json=document)
    assert response.status_code == 200
    assert response.json() == {
        "dryRun": True,
        "prune": True,
        "added": [{"bookie": "c:1", "group": "ssd", "rack": "/r3"}],
        "changed": [
            {
                "bookie": "b:1",
                "before": {"bookie": "b:1", "group": "default", "rack": "/r2"},
                "after": {"bookie": "b:1", "group": "other", "rack": "/r2"},
            }
        ],
        "removed": [],
        "unchanged": 1,
    }
    assert clean_store.snapshot() == before


def test_merge_prune_and_whole_document_validation(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    admin.post(f"{RACKS}/old:1", params={"group": "default"}, json={"rack": "/r0"})
    merged = admin.put(RACKS, json={"default": {"a:1": {"rack": "/r1", "hostname": "h"}}})
    assert merged.status_code == 200 and merged.json()["revision"] > 0
    assert clean_store.get_json("/bookies") == {
        "default": {"a:1": {"rack": "/r1", "hostname": "h"}, "old:1": {"rack": "/r0"}}
    }
    before = clean_store.snapshot()
    bad = {"default": {f"n{i}:1": {"rack": "/r"} for i in range(50)} | {"x:1": {"rack": "/a/b"}}}
    refused = admin.put(RACKS, json=bad)
    assert refused.status_code == 412
    assert refused.json()["reason"].endswith("(bookie x:1, rack '/a/b')")
    twice = admin.put(RACKS, json={"g1": {"a:1": {"rack": "/r"}}, "g2": {"a:1": {"rack": "/r"}}})
    assert twice.status_code == 412
    assert clean_store.snapshot() == before
    pruned = admin.put(RACKS, params={"prune": "true"}, json={"ssd": {"a:1": {"rack": "/r1"}}})
    assert pruned.json()["removed"] == [{"bookie": "old:1", "group": "default", "rack": "/r0"}]
    assert clean_store.get_json("/bookies") == {"ssd": {"a:1": {"rack": "/r1"}}}
    again = admin.put(RACKS, params={"prune": "true"}, json={"ssd": {"a:1": {"rack": "/r1"}}})
    assert again.json()["unchanged"] == 1 and "revision" not in again.json()


def test_import_of_1000_bookies_is_atomic_against_a_concurrent_writer(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    imported = {f"10.0.{i // 250}.{i % 250}:3181" for i in range(1000)}
    document = {"bulk": {b: {"rack": f"/rack{hash(b) % 7}"} for b in sorted(imported)}}
    stop = threading.Event()
    written: list[str] = []
    seen_counts: set[int] = set()
    errors: list[Any] = []

    def writer() -> None:
        with httpx.Client(base_url=str(admin.base_url), timeout=10) as client:
            n = 0
            while not stop.is_set():
                bookie = f"w{n}:3181"
                got = client.post(f"{RACKS}/{bookie}", params={"group": "w"}, json={"rack": "/w"})
                if got.status_code == 204:
                    written.append(bookie)
                else:
                    errors.append(got.text)
                n += 1

    def reader() -> None:
        while not stop.is_set():
            doc = clean_store.get_json("/bookies") or {}
            seen_counts.add(len(imported & set(doc.get("bulk", {}))))

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: written and seen_counts)  # both running before the import
        during = len(written)
        response = admin.put(RACKS, json=document, timeout=30)
        wait_until(lambda: 1000 in seen_counts and len(written) > during + 2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert response.status_code == 200, response.text
    assert len(response.json()["added"]) == 1000
    assert not errors
    assert seen_counts <= {0, 1000}, seen_counts  # never a part of the import
    final = clean_store.get_json("/bookies")
    assert set(final["bulk"]) == imported
    assert set(final["w"]) == set(written)  # no concurrent write lost


def test_prune_import_repairs_an_unreadable_rack_map(
    admin: httpx.Client, clean_store: RawEtcd
) -> None:
    """Another tool left `/bookies` as something that is not JSON: single writes refuse it
    (Pulsar's 500 naming the key), a merge import too; a prune import replaces it."""
    clean_store.put("/bookies", b"\x00not json")
    one = admin.post(f"{RACKS}/a:1", params={"group": "default"}, json={"rack": "/r1"})
    assert one.status_code == 500 and "/bookies" in one.json()["reason"]
    document = {"default": {"a:1": {"rack": "/r1"}}}
    assert admin.put(RACKS, json=document).status_code == 500
    assert clean_store.get("/bookies") == b"\x00not json"
    response = admin.put(RACKS, params={"prune": "true"}, json=document)
    assert response.status_code == 200, response.text
    assert response.json()["added"] == [{"bookie": "a:1", "group": "default", "rack": "/r1"}]
    assert clean_store.get_json("/bookies") == document
    assert wait_until(lambda: admin.get(RACKS).json() == document)
