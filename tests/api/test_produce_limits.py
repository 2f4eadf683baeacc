"""Message sizes as Pulsar counts them (metadata plus payload against maxMessageSize), the
bookie frame limit that follows from it, and the bounds on one produce request: one client's
oversized message is refused alone and never disturbs another tenant's writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.managed_ledger_info import decode_managed_ledger_info
from tests.cli.conftest import run_cli
from tests.storage.bookie.support import service_on_bookies
from tests.support import RawEtcd, ServerProcess

MAX_MESSAGE = 64 * 1024
# the bookies' nettyMaxFrameSizeBytes: maxMessageSize plus Pulsar's 10 KiB frame padding
FRAME_LIMIT = MAX_MESSAGE + 10 * 1024
MOST_MESSAGES = 100
PRODUCERS = 8


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, RawEtcd]]:
    with service_on_bookies(
        tmp_path_factory.mktemp("limits"), 3,
        bookie_conf={"nettyMaxFrameSizeBytes": str(FRAME_LIMIT)},
        service_conf={
            "maxMessageSize": str(MAX_MESSAGE),
            "maxMessagesPerProduceRequest": str(MOST_MESSAGES),
            "managedLedgerMaxEntriesPerLedger": "200",
            "managedLedgerMinLedgerRolloverTimeMinutes": "0",
        },
        namespaces=["victim/ns", "poison/ns"],
    ) as (server, raw, _):
        yield server, raw


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The service at the default maxMessageSize (5 MiB), with bodies up to 16 MiB."""
    frame = 5 * 1024 * 1024 + 10 * 1024
    with service_on_bookies(
        tmp_path_factory.mktemp("roomy"), 2,
        bookie_conf={"nettyMaxFrameSizeBytes": str(frame)},
        service_conf={"httpMaxRequestSize": str(16 * 1024 * 1024)},
        namespaces=["big/ns"],
    ) as (server, _, _):
        yield server


def produce(http: httpx.Client, path: str, messages: list[dict[str, Any]]) -> httpx.Response:
    return http.post(f"/topics/persistent/{path}", json={"messages": messages})


def test_a_poison_message_is_refused_alone_while_another_tenant_writes(
        limited: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = limited
    stop = threading.Event()
    outcomes: list[list[tuple[int, list[int]]]] = [[] for _ in range(PRODUCERS)]

    def write(n: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not stop.is_set() or len(outcomes[n]) < 5:
                answer = produce(http, f"victim/ns/t{n}",
                                 [{"payload": f"m{n}-" + "x" * 1000} for _ in range(20)])
                codes = ([r["errorCode"] for r in answer.json()["messagePublishResults"]]
                         if answer.status_code == 200 else [])
                outcomes[n].append((answer.status_code, codes))

    producers = [threading.Thread(target=write, args=(n,)) for n in range(PRODUCERS)]
    for thread in producers:
        thread.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            poisons = [
                {"payload": "p" * MAX_MESSAGE, "key": "k" * 2000},
                {"payload": "p" * (MAX_MESSAGE - 100), "key": "k" * 8000},
                {"payload": "p" * (MAX_MESSAGE - 10), "properties": {
                    f"k{i}": "v" for i in range(2000)}},
            ]
            for _ in range(4):
                for poison in poisons:
                    refused = produce(http, "poison/ns/p", [poison])
                    assert refused.status_code == 413, refused.text
                    reason = refused.json()["reason"]
                    assert "(metadata and payload)" in reason and "maxMessageSize" in reason
    finally:
        stop.set()
        for thread in producers:
            thread.join(timeout=120)

    statuses = [status for run in outcomes for status, _ in run]
    failed = [code for run in outcomes for _, codes in run for code in codes if code != 0]
    assert statuses and set(statuses) == {200} and failed == []
    # nothing of the refused messages was stored: not even their topic
    assert raw.get("/managed-ledgers/poison/ns/persistent/p") is None
    # and no ledger of the other tenant changed ensemble
    for n in range(PRODUCERS):
        info = decode_managed_ledger_info(
            raw.get(f"/managed-ledgers/victim/ns/persistent/t{n}") or b"")
        assert info.ledgers
        for stored in info.ledgers:
            md = decode_ledger_metadata(stored.ledger_id,
                                        raw.get(paths.ledger(stored.ledger_id)) or b"")
            assert len(md.ensembles) == 1, (stored.ledger_id, md.ensembles)


def test_a_message_at_the_limit_is_stored_and_read_back(
        limited: tuple[ServerProcess, RawEtcd]) -> None:
    server, _ = limited
    with httpx.Client(base_url=server.url, timeout=30) as http:
        # metadata (producer name, sequence id, publish time, key, ...) takes under 200 bytes
        payload = "q" * (MAX_MESSAGE - 200)
        stored = produce(http, "victim/ns/edge", [{"payload": payload, "key": "k"}])
        assert stored.status_code == 200, stored.text
        ledger, entry, _ = stored.json()["messagePublishResults"][0]["messageId"].split(":")
        got = http.get(f"/admin/v2/persistent/victim/ns/edge/ledger/{ledger}/entry/{entry}")
        assert got.status_code == 200 and got.content == payload.encode()
        # header names as the broker sends them, case included
        names = [name for name, _ in got.headers.raw]
        assert b"X-Pulsar-Message-ID" in names and b"X-Pulsar-producer-name" in names
        assert b"x-pulsar-message-id" not in names
        # the same payload with a key that takes it over the limit: 413, nothing added
        over = produce(http, "victim/ns/edge", [{"payload": payload, "key": "k" * 300}])
        assert over.status_code == 413
        stats = http.get("/admin/v2/persistent/victim/ns/edge/internalStats").json()
        assert stats["entriesAddedCounter"] == 1 and stats["numberOfEntries"] == 1


def test_messages_per_request_are_bounded(limited: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = limited
    with httpx.Client(base_url=server.url, timeout=30) as http:
        too_many = produce(http, "victim/ns/many", [{}] * (MOST_MESSAGES + 1))
        assert too_many.status_code == 413
        assert too_many.json()["reason"] == (
            f"A request of {MOST_MESSAGES + 1} messages exceeds the maximum of "
            f"{MOST_MESSAGES} (maxMessagesPerProduceRequest)")
        assert raw.get("/managed-ledgers/victim/ns/persistent/many") is None
        assert produce(http, "victim/ns/many", [{}] * MOST_MESSAGES).status_code == 200


def test_a_message_whose_metadata_does_not_fit_in_headers_reads_as_a_clear_500(
        roomy: ServerProcess) -> None:
    """A 4 MB key or 200,000 properties fit in maxMessageSize, so the producer stores them as
    upstream's does; reading such a message back answers Jetty's 500 "Response header too
    large" with a reason in Pulsar's shape, through the REST API and pulsar-admin, and the
    connection stays usable."""
    topic = "persistent://big/ns/metadata"
    with httpx.Client(base_url=roomy.url, timeout=60) as http:
        key = produce(http, "big/ns/metadata", [{"payload": "a", "key": "k" * 4_000_000}])
        assert key.status_code == 200, key.text
        many = produce(http, "big/ns/metadata", [{"payload": "b", "properties": {
            f"p{i}": "v" for i in range(200_000)}}])
        assert many.status_code == 200, many.text
        small = produce(http, "big/ns/metadata", [{"payload": "c", "key": "k" * 6000}])
        assert small.status_code == 200, small.text
        ids = [r.json()["messagePublishResults"][0]["messageId"].split(":")[:2]
               for r in (key, many, small)]
        base = "/admin/v2/persistent/big/ns/metadata"
        for ledger, entry in ids[:2]:
            got = http.get(f"{base}/ledger/{ledger}/entry/{entry}")
            assert got.status_code == 500
            reason = got.json()["reason"]
            assert reason.startswith("Response header too large: the message's headers")
            assert "8192 bytes" in reason
        for position in (3, 2):  # 3 from the latest is the key, 2 the properties
            got = http.get(f"{base}/examinemessage",
                           params={"initialPosition": "latest", "messagePosition": position})
            assert got.status_code == 500 and "Response header too large" in got.json()["reason"]
        # a key of 6,000 bytes still fits, and the same connection reads it
        ledger, entry = ids[2]
        read = http.get(f"{base}/ledger/{ledger}/entry/{entry}")
        assert read.status_code == 200 and read.content == b"c"
        assert read.headers["X-Pulsar-partition-key"] == "k" * 6000

    ledger, entry = ids[0]
    by_id = run_cli("--admin-url", roomy.url, "topics", "get-message-by-id", topic,
                    "-l", ledger, "-e", entry)
    assert by_id.code == 1 and by_id.out == "", by_id
    assert "Response header too large" in by_id.err and "Traceback" not in by_id.err
    examined = run_cli("--admin-url", roomy.url, "topics", "examine-messages", topic,
                       "-i", "earliest", "-m", "2")
    assert examined.code == 1 and "Response header too large" in examined.err, examined
    readable = run_cli("--admin-url", roomy.url, "topics", "examine-messages", topic)
    assert readable.code == 0, readable
    assert readable.out.splitlines()[0] == f"Message ID: {ids[2][0]}:{ids[2][1]}"
