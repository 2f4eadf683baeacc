"""The watch stream's pieces against a real etcd, without HTTP: what each `prefix` selects, and
a client that lags behind is dropped with `event: resync` after what it was owed so far."""

from __future__ import annotations

import json

import pytest

from api.services.watch import SELECTIONS, WatchSession, decode_value
from metastore.store import MetadataStore
from tests.support import wait_until_async

KEYS = {
    "/bookies": "bookies",
    "/ledgers/available/10.0.0.1:3181": "bookies",
    "/ledgers/available/readonly/10.0.0.1:3181": "bookies",
    "/admin/policies/t1": "policies",
    "/admin/policies/t1/ns1": "policies",
    "/admin/local-policies/t1/ns1": "policies",
    "/admin/clusters/c1/namespaceIsolationPolicies": "policies",
    "/admin/clusters/c1": "clusters",
    "/admin/clusters/c1/failureDomain/d1": "clusters",
    "/ledgers/00/0000/L0001": "ledgers",
    "/ledgers/underreplication/ledgers/0000/0000/0000/urL0000000001": None,
    "/ledgers/LAYOUT": None,
    "/bookiesX": None,
    "/loadbalance/brokers/b1:8080": None,
    "/managed-ledgers/t1/ns1/persistent/tp": None,
    "/admin/partitioned-topics/t1/ns1/persistent/tp": None,
}


@pytest.mark.parametrize(("key", "name"), sorted(KEYS.items()))
def test_each_prefix_selects_its_keys_inside_its_watched_range(key: str, name: str | None) -> None:
    chosen = [n for n, s in SELECTIONS.items() if s.keep(key)]
    assert chosen == ([name] if name else [])
    for selection in SELECTIONS.values():
        if selection.keep(key):
            assert selection.first.encode() <= key.encode() < selection.end.encode()


def test_documents_are_decoded() -> None:
    assert decode_value("/bookies", b'{"default":{}}') == {"default": {}}
    assert decode_value("/bookies", None) is None
    registration = decode_value("/ledgers/available/10.0.0.1:3181", b"")
    assert registration["endpoints"][0]["host"] == "10.0.0.1"


async def test_a_lagging_client_gets_what_it_was_owed_then_resync(store: MetadataStore) -> None:
    session = await WatchSession.open(store, SELECTIONS["bookies"], None, queue_limit=5)
    frames = session.frames()
    assert (await anext(frames)).startswith(b": watching bookies from revision ")
    written = [await store.put(f"/ledgers/available/10.0.0.{i}:3181", b"") for i in range(12)]
    # the pump stopped at the limit: 5 changes and the end
    await wait_until_async(lambda: session.pending >= 6)
    rest = b"".join([frame async for frame in frames]).decode()
    blocks = [block for block in rest.split("\n\n") if block]
    ids = [int(b.split("\n")[0].removeprefix("id: ")) for b in blocks if b.startswith("id: ")]
    assert ids == written[:5]  # no gap up to where it stopped
    assert blocks[-1].startswith("event: resync\ndata: ")
    data = json.loads(blocks[-1].split("data: ", 1)[1])
    assert data["reason"] == "lagging"
    assert data["revision"] >= written[-1]
