"""A REST produce (and a lookup) reads its namespace's policies and local policies from the
service's watch-fed caches, once each per request, never from the metadata store (the reads are
counted by the repositories and exported at `/metrics`); a change another client writes
straight into etcd is in effect for the next produce."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from metastore import paths
from tests.storage.bookie.support import service_on_bookies
from tests.support import RawEtcd, ServerProcess, wait_until

NAMESPACE = "cached/ns"
PRODUCES = 10


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, RawEtcd]]:
    with service_on_bookies(tmp_path_factory.mktemp("policy-cache"), 2,
                            namespaces=[NAMESPACE]) as (server, raw, _):  # fmt: skip
        yield server, raw


def document_reads(http: httpx.Client) -> dict[tuple[str, str], float]:
    """{(document, source): reads} from the service's metrics."""
    text = http.get("/metrics").raise_for_status().text
    found: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("metadata_document_reads"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        found[labels["document"], labels["source"]] = float(line.rsplit(" ", 1)[1])
    return found


def produce(http: httpx.Client, topic: str) -> httpx.Response:
    return http.post(f"/topics/persistent/{NAMESPACE}/{topic}",
                     json={"messages": [{"payload": "hello"}]})  # fmt: skip


def test_produce_reads_policies_from_the_cache_once_per_request(
    service: tuple[ServerProcess, RawEtcd],
) -> None:
    server, _ = service
    with httpx.Client(base_url=server.url, timeout=30) as http:
        produce(http, "warm").raise_for_status()
        before = document_reads(http)
        for _ in range(PRODUCES):
            results = produce(http, "warm").raise_for_status().json()
            assert results["messagePublishResults"][0]["errorCode"] == 0
        after = document_reads(http)
    for document in ("policies", "local-policies"):
        assert after.get((document, "store"), 0) == before.get((document, "store"), 0)
        served = after[document, "cache"] - before.get((document, "cache"), 0)
        assert served == PRODUCES, document


def test_lookup_reads_policies_from_the_cache_once_per_request(
    service: tuple[ServerProcess, RawEtcd],
) -> None:
    server, _ = service
    with httpx.Client(base_url=server.url, timeout=30) as http:
        before = document_reads(http)
        for _ in range(PRODUCES):  # no broker registered: answered 503 after the reads
            http.get(f"/lookup/v2/topic/persistent/{NAMESPACE}/looked-up")
        after = document_reads(http)
    for document in ("policies", "local-policies"):
        assert after.get((document, "store"), 0) == before.get((document, "store"), 0)
        assert after[document, "cache"] - before.get((document, "cache"), 0) == PRODUCES


def test_a_policy_written_by_another_client_is_seen_by_the_next_produce(
    service: tuple[ServerProcess, RawEtcd],
) -> None:
    server, raw = service
    path = paths.namespace(*NAMESPACE.split("/"))
    stored = raw.get(path)
    assert stored is not None
    policies = json.loads(stored)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        produce(http, "before-change").raise_for_status()
        policies["autoTopicCreationOverride"] = {"allowAutoTopicCreation": False,
                                                 "topicType": "non-partitioned"}
        raw.put(path, policies)
        attempts = iter(range(1000))

        def refused() -> bool:
            answer = produce(http, f"new-topic-{next(attempts)}")
            return answer.status_code == 404 and answer.json()["reason"] == "Topic not exist"

        wait_until(refused, timeout=10)
        assert produce(http, "before-change").status_code == 200  # an existing topic: yes
        del policies["autoTopicCreationOverride"]
        raw.put(path, policies)
        wait_until(lambda: produce(http, f"new-topic-{next(attempts)}").status_code == 200,
                   timeout=10)  # fmt: skip
