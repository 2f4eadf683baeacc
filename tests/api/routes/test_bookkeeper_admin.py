"""BookKeeper's HTTP admin paths on the real server, over ledgers and bookie registrations
written through the metastore modules: bodies byte for byte as a bookie's HTTP server
(Jackson's pretty printer, no Content-Type), and its quirks."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest

from metastore.bookie_service_info import bookie_service_info, encode_bookie_service_info
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import (
    DigestType,
    LedgerMetadata,
    LedgerState,
    encode_ledger_metadata,
)
from metastore.ledgers import LedgerMetadataStore
from metastore.versioned_keys import VersionedKeys
from tests.support import RawEtcd

EXAMPLE = LedgerMetadata(  # the reference's worked example (ledger 1)
    ledger_id=1,
    ensemble_size=2,
    write_quorum_size=2,
    ack_quorum_size=2,
    ensembles={0: ("127.0.0.1:3181", "127.0.0.2:3181")},
    custom_metadata={
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": b"public/default/persistent/t1",
    },
)
# customMetadata in Java HashMap order (the reader fills a HashMap): component,
# pulsar/managed-ledger, application
EXAMPLE_BODY = """{
  "1" : {
    "ledgerId" : 1,
    "metadataFormatVersion" : 3,
    "ensembleSize" : 2,
    "writeQuorumSize" : 2,
    "ackQuorumSize" : 2,
    "state" : "OPEN",
    "length" : 0,
    "lastEntryId" : -1,
    "ctime" : 0,
    "digestType" : "CRC32C",
    "password" : "",
    "customMetadata" : {
      "component" : "bWFuYWdlZC1sZWRnZXI=",
      "pulsar/managed-ledger" : "cHVibGljL2RlZmF1bHQvcGVyc2lzdGVudC90MQ==",
      "application" : "cHVsc2Fy"
    },
    "allEnsembles" : {
      "0" : [ {
        "id" : "127.0.0.1:3181"
      }, {
        "id" : "127.0.0.2:3181"
      } ]
    },
    "closed" : false,
    "ctoken" : 0
  }
}"""
NOT_GET = "Not found method. Should be GET method"


def write_ledgers(etcd: EmbeddedEtcd, *ledgers: LedgerMetadata) -> None:
    async def write() -> None:
        keys = VersionedKeys([etcd.endpoint])
        store = LedgerMetadataStore(keys)
        await asyncio.gather(*(store.create(ledger) for ledger in ledgers))
        await keys.close()

    asyncio.run(write())


@pytest.fixture
def bk(admin: httpx.Client, etcd: EmbeddedEtcd) -> Iterator[httpx.Client]:
    write_ledgers(etcd, EXAMPLE)
    yield admin


@pytest.mark.parametrize("path", ["/api/v1/ledger/metadata/", "/api/v1/ledger/metadata"])
def test_ledger_metadata_as_a_bookie_answers(bk: httpx.Client, path: str) -> None:
    response = bk.get(path, params={"ledger_id": "1"})
    assert response.status_code == 200
    assert "content-type" not in response.headers
    assert response.text == EXAMPLE_BODY


def test_closed_ledger_with_password_and_ctime(bk: httpx.Client, etcd: EmbeddedEtcd) -> None:
    closed = dataclasses.replace(
        EXAMPLE,
        ledger_id=2**31 + 5,  # a 63-bit id at the long path
        ensembles={0: EXAMPLE.ensembles[0], 7: ("127.0.0.1:3181", "127.0.0.3:3181")},
        state=LedgerState.CLOSED,
        last_entry_id=11,
        length=1200,
        digest_type=DigestType.MAC,
        password=b"secret",
        ctime=1700000000123,
        ctoken=42,
    )
    write_ledgers(etcd, closed)
    body = bk.get("/api/v1/ledger/metadata", params={"ledger_id": str(2**31 + 5)}).json()
    bean = body[str(2**31 + 5)]
    assert (bean["state"], bean["closed"], bean["lastEntryId"], bean["length"]) == (
        "CLOSED", True, 11, 1200,
    )  # fmt: skip
    assert (bean["digestType"], base64.b64decode(bean["password"])) == ("MAC", b"secret")
    assert (bean["ctime"], bean["ctoken"]) == (1700000000123, 42)
    assert bean["allEnsembles"]["7"] == [{"id": "127.0.0.1:3181"}, {"id": "127.0.0.3:3181"}]


@pytest.mark.parametrize(
    ("method", "path", "params", "status", "body"),
    [
        ("GET", "/api/v1/ledger/metadata", {}, 404, NOT_GET),
        ("POST", "/api/v1/ledger/metadata", {"ledger_id": "1"}, 404, NOT_GET),
        ("PUT", "/api/v1/ledger/list/", {}, 404, NOT_GET),
        ("DELETE", "/api/v1/bookie/list_bookies", {}, 404, NOT_GET),
        ("GET", "/api/v1/ledger/metadata", {"ledger_id": "77"}, 500, "Internal Server Error"),
        ("GET", "/api/v1/ledger/metadata", {"ledger_id": "x1"}, 500, "Internal Server Error"),
        ("GET", "/api/v1/ledger/list", {"print_metadata": "true", "page": "one"}, 500,
         "Internal Server Error"),
    ],
)  # fmt: skip
def test_errors_as_upstream(
    bk: httpx.Client, method: str, path: str, params: dict[str, str], status: int, body: str
) -> None:
    response = bk.request(method, path, params=params)
    assert (response.status_code, response.text) == (status, body)
    assert "content-type" not in response.headers


def test_ledger_list_shapes_and_pages(bk: httpx.Client, etcd: EmbeddedEtcd) -> None:
    write_ledgers(etcd, *(dataclasses.replace(EXAMPLE, ledger_id=i) for i in range(2, 151)))
    ids = [str(i) for i in range(1, 151)]

    plain = bk.get("/api/v1/ledger/list/")
    assert plain.status_code == 200 and "content-type" not in plain.headers
    assert list(plain.json().items()) == [(i, None) for i in ids]  # ids in order, null values
    assert plain.text.startswith('{\n  "1" : null,\n  "2" : null,')

    raw = bk.get("/api/v1/ledger/list", params={"print_metadata": "true", "page": "2"}).json()
    assert list(raw) == ids[99:]  # page 2: the 100th ledger on
    assert raw["100"] == encode_ledger_metadata(dataclasses.replace(EXAMPLE, ledger_id=100)).decode(
        errors="replace"
    )
    page_one = bk.get("/api/v1/ledger/list", params={"print_metadata": "true", "page": "1"})
    assert list(page_one.json()) == ids[:99]  # upstream's page 1 holds 99 ledgers
    # page without print_metadata is ignored
    assert len(bk.get("/api/v1/ledger/list", params={"page": "2"}).json()) == 150

    decoded = bk.get(
        "/api/v1/ledger/list", params={"print_metadata": "true", "decode_meta": "true"}
    ).json()
    assert list(decoded) == ids
    assert decoded["1"] == json.loads(EXAMPLE_BODY)["1"]


def test_list_bookies(bk: httpx.Client, raw_etcd: RawEtcd) -> None:
    registration = bookie_service_info("bookie-a.example", 3181, http_port=8000)
    raw_etcd.put("/ledgers/available/10.0.0.1:3181", encode_bookie_service_info(registration))
    raw_etcd.put("/ledgers/available/10.0.0.2:3181", b"")  # legacy: host from the id
    raw_etcd.put("/ledgers/available/readonly", b"")
    raw_etcd.put("/ledgers/available/readonly/10.0.0.3:3181", b"")

    names = bk.get("/api/v1/bookie/list_bookies/", params={"type": "rw"})
    assert names.status_code == 200 and "content-type" not in names.headers
    assert names.json() == {"10.0.0.1:3181": None, "10.0.0.2:3181": None}
    hosts = bk.get("/api/v1/bookie/list_bookies", params={"print_hostnames": "true"}).json()
    assert hosts == {"10.0.0.1:3181": "bookie-a.example", "10.0.0.2:3181": "10.0.0.2"}
    read_only = bk.get(
        "/api/v1/bookie/list_bookies", params={"type": "ro", "print_hostnames": "true"}
    )
    assert read_only.text == '{\n  "10.0.0.3:3181" : "10.0.0.3"\n}'
    assert bk.get("/api/v1/bookie/list_bookies", params={"type": "ro "}).json() == names.json()


