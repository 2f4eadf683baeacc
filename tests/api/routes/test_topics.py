"""Topics over HTTP on the real service with real bookie processes: Pulsar's REST producer,
the admin topic paths, message reads byte for byte, rollover inside a strict namespace's
groups, bad input, and a kill -9 of the service in the middle of a produce loop."""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.managed_ledger_info import decode_managed_ledger_info
from tests.storage.testbed import TOPIC_MAX_MESSAGE, Cluster
from tests.support import ServerProcess, wait_until

MAX_MESSAGE = TOPIC_MAX_MESSAGE


@pytest.fixture
def http(topic_service: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=topic_service.url, timeout=15) as client:
        yield client


def produce(http: httpx.Client, topic: str, payloads: list[str], **extra: Any) -> httpx.Response:
    body = {"messages": [{"payload": p, **extra} for p in payloads]}
    return http.post(f"/topics/persistent/acme/{topic}", json=body)


def message_id(ack: dict[str, Any]) -> tuple[int, int]:
    ledger, entry, partition = ack["messageId"].split(":")
    assert partition == "-1" and ack["errorCode"] == 0
    return int(ledger), int(entry)


def test_produce_then_read_back_every_message(http: httpx.Client, topic_cluster: Cluster) -> None:
    payloads = [f"héllo {i} " + "✓" * (i % 5) for i in range(25)]
    response = produce(http, "strict/orders", payloads, properties={"k": "v"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["schemaVersion"] == 0
    ids = [message_id(ack) for ack in body["messagePublishResults"]]
    assert len({ledger for ledger, _ in ids}) == 3  # rolled over every 10 entries
    for (ledger, entry), payload in zip(ids, payloads, strict=True):
        got = http.get(f"/admin/v2/persistent/acme/strict/orders/ledger/{ledger}/entry/{entry}")
        assert got.status_code == 200
        assert got.content == payload.encode()
        assert got.headers["X-Pulsar-Message-ID"] == f"{ledger}:{entry}"
        assert got.headers["X-Pulsar-PROPERTY"] == '{"k":"v"}'
        assert got.headers["X-Pulsar-producer-name"] == "RestProducer"
        assert got.headers["X-Pulsar-compression"] == "NONE"
        assert got.headers["X-Pulsar-Is-Encrypted"] == "false"
        assert "X-Pulsar-null-partition-key" not in got.headers  # the REST producer never sets it
    latest = http.get("/admin/v2/persistent/acme/strict/orders/examinemessage",
                      params={"initialPosition": "latest", "messagePosition": 1})
    assert latest.content == payloads[-1].encode()
    earliest = http.get("/admin/v2/persistent/acme/strict/orders/examinemessage",
                        params={"initialPosition": "earliest", "messagePosition": 2})
    assert earliest.content == payloads[1].encode()
    assert http.get("/admin/v2/persistent/acme/strict").json() == [
        "persistent://acme/strict/orders"]

    # every ledger of the strict namespace lies in its group, across rollovers
    info = decode_managed_ledger_info(
        topic_cluster.raw.get("/managed-ledgers/acme/strict/persistent/orders") or b"")
    assert [i.ledger_id for i in info.ledgers][:3] == sorted({ledger for ledger, _ in ids})
    for stored in info.ledgers:
        md = decode_ledger_metadata(stored.ledger_id,
                                    topic_cluster.raw.get(paths.ledger(stored.ledger_id)) or b"")
        assert set(md.ensembles[0]) == set(topic_cluster.ids[:2])
        assert b'"isolationBookieGroups" : "iso"' in md.custom_metadata[
            "EnsemblePlacementPolicyConfig"]

    stats = http.get("/admin/v2/persistent/acme/strict/orders/internalStats").json()
    assert stats["numberOfEntries"] == 25 and stats["entriesAddedCounter"] == 25
    # as the broker: the open ledger's LedgerInfo has no counts until it is closed
    assert [ledger["entries"] for ledger in stats["ledgers"]] == [10, 10, 0]
    assert stats["currentLedgerEntries"] == 5
    assert stats["lastConfirmedEntry"] == f"{ids[-1][0]}:{ids[-1][1]}"


def test_create_list_delete(http: httpx.Client, topic_cluster: Cluster) -> None:
    assert http.put("/admin/v2/persistent/acme/plain/made").status_code == 204
    again = http.put("/admin/v2/persistent/acme/plain/made")
    assert again.status_code == 409 and again.json() == {"reason": "This topic already exists"}
    assert "persistent://acme/plain/made" in http.get("/admin/v2/persistent/acme/plain").json()
    acks = produce(http, "plain/made", ["a", "b"]).json()["messagePublishResults"]
    ledger, _ = message_id(acks[0])
    assert topic_cluster.raw.get(paths.ledger(ledger)) is not None
    assert http.delete("/admin/v2/persistent/acme/plain/made").status_code == 204
    assert topic_cluster.raw.get(paths.ledger(ledger)) is None  # its ledgers went with it
    assert topic_cluster.raw.get("/managed-ledgers/acme/plain/persistent/made") is None
    gone = http.delete("/admin/v2/persistent/acme/plain/made")
    assert gone.status_code == 404
    assert gone.json() == {"reason": "Topic persistent://acme/plain/made not found"}


def test_a_partition_name_needs_its_partitioned_topic(http: httpx.Client,
                                                     topic_cluster: Cluster) -> None:
    """Pulsar's `validateNonPartitionTopicName`: `-partition-` and digits name a partition,
    creatable only below the partition count of the partitioned topic before it; anything
    else after it (a sign, a letter, a second suffix) is an ordinary name."""
    base = "/admin/v2/persistent/acme/plain"
    refused = http.put(f"{base}/p-partition-0")
    assert (refused.status_code, refused.json()["reason"]) == (412, (
        "Can't create topic p-partition-0 with \"-partition-\" followed by numeric value if "
        "there isn't a partitioned topic p created."))
    topic_cluster.raw.put("/admin/partitioned-topics/acme/plain/persistent/p",
                          b'{"partitions":2}')
    try:
        assert http.put(f"{base}/p-partition-1").status_code == 204
        beyond = http.put(f"{base}/p-partition-2")
        assert (beyond.status_code, beyond.json()["reason"]) == (412, (
            "Can't create topic p-partition-2 with \"-partition-\" followed by a number "
            "smaller than number of partition of partitioned topic p"))
    finally:
        topic_cluster.raw.delete("/admin/partitioned-topics/acme/plain/persistent/p")
    for name in ("q-partition-+3", "q-partition-x", "q-partition-1-partition-2"):
        assert http.put(f"{base}/{name}").status_code == 204, name
    assert topic_cluster.raw.get("/managed-ledgers/acme/plain/persistent/p-partition-0") is None


def test_under_replicated_when_an_ensemble_bookie_is_not_registered(
    http: httpx.Client, topic_cluster: Cluster
) -> None:
    produce(http, "strict/watched", ["x"])
    url = "/admin/v2/persistent/acme/strict/watched/internalStats"
    ledgers = http.get(url, params={"metadata": "true"}).json()["ledgers"]
    assert ledgers and not any(ledger["underReplicated"] for ledger in ledgers)
    assert all("metadata" in ledger for ledger in ledgers)
    text = ledgers[-1]["metadata"]  # LedgerMetadataImpl.toSafeString()
    assert re.fullmatch(
        r"LedgerMetadata\{formatVersion=3, ensembleSize=2, writeQuorumSize=2, ackQuorumSize=2, "
        r"state=OPEN, digestType=CRC32C, password=OMITTED, ensembles=\{0=\[[0-9.:]+, "
        r"[0-9.:]+\]\}, customMetadata=\{.*application=base64:cHVsc2Fy.*\}\}", text), text
    key = paths.bookie_available(topic_cluster.ids[0])
    saved = topic_cluster.raw.get(key)
    topic_cluster.raw.delete(key)
    try:
        ledgers = http.get(url, params={"metadata": "true"}).json()["ledgers"]
        assert all(ledger["underReplicated"] for ledger in ledgers)
    finally:
        topic_cluster.raw.put(key, saved or b"")


def test_bad_input(http: httpx.Client, topic_cluster: Cluster) -> None:
    for path in ("/topics/persistent/nobody/ns/t", "/topics/persistent/acme/nons/t"):
        missing = http.post(path, json={"messages": [{"payload": "x"}]})
        assert missing.status_code == 404, missing.text
        assert missing.json() == {"reason": "Namespace does not exist"}

    shapeless = http.post("/topics/persistent/acme/plain/big", json={"messages": ["x"]})
    assert shapeless.status_code == 400 and shapeless.json()["reason"]

    big = produce(http, "plain/big", ["small", "x" * (MAX_MESSAGE + 1)])
    assert big.status_code == 413 and "maxMessageSize" in big.json()["reason"]
    assert topic_cluster.raw.get("/managed-ledgers/acme/plain/persistent/big") is None  # nothing

    ledger, _ = message_id(produce(http, "plain/ids", ["one"]).json()["messagePublishResults"][0])
    base = "/admin/v2/persistent/acme/plain/ids/ledger"
    assert http.get(f"{base}/{ledger}/entry/0").content == b"one"
    for bad in (f"{ledger}/entry/1", f"{ledger}/entry/-1", f"{ledger}/entry/abc",
                "abc/entry/0", "999999/entry/0", f"{ledger + 1000}/entry/0"):
        response = http.get(f"{base}/{bad}")
        assert response.status_code == 404, (bad, response.text)
        assert response.json()["reason"]
    assert http.get("/admin/v2/persistent/acme/plain/nope/ledger/1/entry/0").status_code == 404
    examine = http.get("/admin/v2/persistent/acme/plain/ids/examinemessage",
                       params={"messagePosition": 5})
    assert examine.status_code == 404


@pytest.mark.slow
def test_kill_9_mid_produce_loses_no_acknowledged_message(topic_service: ServerProcess) -> None:
    service = topic_service
    acked: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()

    def loop() -> None:
        with httpx.Client(base_url=service.url, timeout=5) as client:
            i = 0
            while not stop.is_set():
                payload = base64.b64encode(f"msg-{i}".encode() * (i % 9 + 1)).decode()
                try:
                    response = produce(client, "plain/crash", [payload, payload + "!"])
                except httpx.HTTPError:
                    return
                if response.status_code != 200:
                    return
                for ack, sent in zip(response.json()["messagePublishResults"],
                                     (payload, payload + "!"), strict=True):
                    acked[message_id(ack)] = sent.encode()
                i += 1

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        wait_until(lambda: len(acked) >= 40, timeout=30)
        service.kill()
    finally:
        stop.set()
        thread.join(timeout=30)
    service.start()
    with httpx.Client(base_url=service.url, timeout=15) as client:
        for (ledger, entry), payload in sorted(acked.items()):
            got = client.get(
                f"/admin/v2/persistent/acme/plain/crash/ledger/{ledger}/entry/{entry}")
            assert got.status_code == 200, (ledger, entry, got.text)
            assert got.content == payload
        more = produce(client, "plain/crash", ["after restart"])
        assert more.status_code == 200




def test_message_headers_and_examine_as_the_broker(http: httpx.Client,
                                                   topic_cluster: Cluster) -> None:
    """Pulsar 4.0's `generateResponseWithEntry` and `internalExamineMessageAsync`: header
    names as written, properties as one Gson object in HashMap order, Java's dates, and
    the examine parameters' defaults."""
    empty = "/admin/v2/persistent/acme/plain/quiet"
    assert http.put(empty).status_code == 204
    nothing = http.get(f"{empty}/examinemessage")
    assert nothing.status_code == 412
    assert nothing.json() == {
        "reason": "Could not examine messages due to the total message is zero"}

    message = {"payload": "p", "key": "k1", "eventTime": "1789490671800", "deliverAfterMs": 5,
               "disableReplication": True,
               "properties": {"zeta": "1", "a<b": "x=y", "k": "v"}}
    sent = http.post("/topics/persistent/acme/plain/heads", json={"messages": [message]})
    assert sent.status_code == 200, sent.text
    ledger, entry = message_id(sent.json()["messagePublishResults"][0])
    got = http.get(f"/admin/v2/persistent/acme/plain/heads/ledger/{ledger}/entry/{entry}")
    assert got.headers["content-type"] == "application/json"
    assert got.headers["X-Pulsar-PROPERTY"] == (
        '{"zeta":"1","a\\u003cb":"x\\u003dy","k":"v"}')  # HashMap order, Gson's escapes
    assert got.headers["X-Pulsar-event-time"] == "2026-09-15T16:44:31.8Z"
    assert got.headers["X-Pulsar-deliver-at-time"] == "2026-09-15T16:44:31.805Z"
    assert got.headers["X-Pulsar-partition-key"] == "k1"
    assert got.headers["X-Pulsar-partition-key-b64-encoded"] == "false"
    assert got.headers["X-Pulsar-replicated-to"] == "__local__"
    assert got.headers["X-Pulsar-txn-uncommitted"] == "false"
    publish = got.headers["X-Pulsar-publish-time"]
    assert publish.endswith("Z") and ".000" not in publish

    base = "/admin/v2/persistent/acme/plain/heads/examinemessage"
    for params in ({"messagePosition": 0}, {"messagePosition": -3},
                   {"initialPosition": "sideways"}):
        clamped = http.get(base, params=params)
        assert clamped.status_code == 200, (params, clamped.text)
        assert clamped.content == b"p"
    other = http.get(f"/admin/v2/persistent/acme/plain/heads/ledger/{ledger + 1000}/entry/0")
    assert other.status_code == 404 and other.json() == {"reason": "Message id not found"}

    stats = http.get("/admin/v2/persistent/acme/plain/heads/internalStats").json()
    assert stats["lastLedgerCreatedTimestamp"].endswith("Z")

    bad_time = http.post("/topics/persistent/acme/plain/heads",
                         json={"messages": [{"payload": "x", "eventTime": "abc"}]})
    assert bad_time.status_code == 500
    assert bad_time.json() == {"reason": 'For input string: "abc"'}
    for path in ("/topics/persistent/acme/b@d/t", "/admin/v2/persistent/acme/b@d/t/internalStats"):
        invalid = (http.post(path, json={"messages": []}) if path.startswith("/topics")
                   else http.get(path))
        assert invalid.status_code == 412 and invalid.json() == {
            "reason": "Topic name is not valid"}


def test_wrong_types_and_names_are_refused_and_store_nothing(
    http: httpx.Client, topic_cluster: Cluster
) -> None:
    """Fields bound as Jackson binds them (a wrong type is a 400, not a 500 or a mangled
    value), names that would collide refused, ids parsed as Jersey parses a long."""
    url = "/topics/persistent/acme/plain/typed"
    for message in ({"payload": {"a": 1}}, {"payload": "x", "properties": [1, 2]},
                    {"payload": "x", "properties": {"a": None}},
                    {"payload": "x", "key": {"k": 1}}, {"payload": "x", "sequenceId": "abc"},
                    {"payload": "x", "sequenceId": True}, {"payload": "x", "eventTime": [1]},
                    {"payload": "x", "replicationClusters": "c1"},
                    {"payload": "x", "disableReplication": "maybe"}):
        refused = http.post(url, json={"messages": [{"payload": "ok"}, message]})
        assert refused.status_code == 400, (message, refused.text)
        assert refused.json()["reason"]
    named = http.post(url, json={"producerName": 7, "messages": [
        {"payload": 12, "sequenceId": "5", "properties": {"n": 1, "b": True}}]})
    assert named.status_code == 200, named.text
    ledger, entry = message_id(named.json()["messagePublishResults"][0])
    got = http.get(f"/admin/v2/persistent/acme/plain/typed/ledger/{ledger}/entry/{entry}")
    assert got.content == b"12" and got.headers["X-Pulsar-producer-name"] == "7"
    assert got.headers["X-Pulsar-sequence-id"] == "5"
    assert got.headers["X-Pulsar-PROPERTY"] == '{"b":"true","n":"1"}'

    for name in ("a%2Fb", "a%00b", "%2E%2E"):
        for response in (http.post(f"/topics/persistent/acme/plain/{name}",
                                   json={"messages": [{"payload": "x"}]}),
                         http.put(f"/admin/v2/persistent/acme/plain/{name}")):
            # an escaped NUL is a bad URI before any route (400), as Pulsar's Jetty says
            assert response.status_code in ((400,) if name == "a%00b" else (404, 412)), (
                name, response.text)
            if response.status_code == 412:
                assert response.json() == {"reason": "Topic name is not valid"}
    listed = http.get("/admin/v2/persistent/acme/plain").json()
    assert not any("\x00" in topic or topic.endswith("/a") for topic in listed)

    base = f"/admin/v2/persistent/acme/plain/typed/ledger/{ledger}/entry"
    for bad in ("1_0", "%EF%BC%BF1", f"{1 << 63}"):
        response = http.get(f"{base}/{bad}")
        assert response.status_code == 404
        assert response.json() == {"reason": f"Invalid entry id: {unquote(bad)}"}
