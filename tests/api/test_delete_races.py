"""Deletes racing writes, as upstream orders them: a namespace being deleted is marked
(`Policies.deleted`) before anything else, so a topic auto-created by a producer at the same
moment either exists before the mark (and the delete is refused or takes it along) or is
refused with Pulsar 4.0's answers; a produce racing a topic delete gets a 2xx or Pulsar's 4xx,
never a 500. After every interleaving no managed ledger, ledger or policy is left without its
owner."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from metastore import paths
from metastore.managed_ledger_info import decode_managed_ledger_info
from tests.storage.bookie.support import service_on_bookies
from tests.support import RawEtcd, ServerProcess, wait_until

ROUNDS = 100
# Into a namespace whose policies are marked deleted, a topic create fails Pulsar 4.0's
# `checkLocalOrGetPeerReplicationCluster` (404), and so does a REST produce (README, "Deletes")
NAMESPACE_DELETED = {"reason": "Namespace is deleted"}
LEDGER_KEY = re.compile(r"^/ledgers/(\d+/)+L\d+$")


@pytest.fixture(scope="module")
def racing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, RawEtcd]]:
    with service_on_bookies(tmp_path_factory.mktemp("races"), 2, service_conf={
        "forceDeleteNamespaceAllowed": "true",
        "forceDeleteTenantAllowed": "true",
    }, namespaces=["race"]) as (server, raw, _):
        yield server, raw


def at_once(*calls: Callable[[], httpx.Response]) -> list[httpx.Response]:
    """Run the calls on threads released together; their answers in call order."""
    gate = threading.Barrier(len(calls))
    answers: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        gate.wait()
        answers[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def orphans(raw: RawEtcd) -> tuple[list[str], set[int]]:
    """Managed ledgers outside a live namespace, and ledgers no managed ledger lists."""
    stray_topics = []
    owned: set[int] = set()
    for key in raw.keys("/managed-ledgers/"):
        parts = key.split("/")
        if len(parts) != 6:  # /managed-ledgers/t/ns/persistent/topic (cursors below)
            continue
        if raw.get(paths.namespace(parts[2], parts[3])) is None:
            stray_topics.append(key)
        owned |= {i.ledger_id for i in decode_managed_ledger_info(raw.get(key) or b"").ledgers}
    ledgers = {int(key.rsplit("/L", 1)[1]) for key in raw.keys("/ledgers/")
               if LEDGER_KEY.match(key)}
    return stray_topics, ledgers - owned


def server_log(server: ServerProcess) -> str:
    return (server.workdir / "server.log").read_text(errors="replace")


def produce(http: httpx.Client, topic: str) -> httpx.Response:
    return http.post(f"/topics/persistent/race/{topic}",
                     json={"messages": [{"payload": "a"}, {"payload": "b"}]})


def test_namespace_delete_against_topic_auto_create(
        racing: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = racing
    seen: dict[tuple[int, int], int] = {}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for i in range(ROUNDS):
            ns = f"ns{i}"
            assert http.put(f"/admin/v2/namespaces/race/{ns}").status_code == 204
            force = "true" if i % 2 else "false"
            deleted, produced = at_once(
                lambda ns=ns, force=force: http.delete(  # type: ignore[misc]
                    f"/admin/v2/namespaces/race/{ns}", params={"force": force}),
                lambda ns=ns: produce(http, f"{ns}/t"),  # type: ignore[misc]
            )
            key = (deleted.status_code, produced.status_code)
            seen[key] = seen.get(key, 0) + 1
            assert deleted.status_code in (204, 409), deleted.text
            assert produced.status_code in (200, 404), produced.text
            if produced.status_code == 200:
                codes = {r["errorCode"] for r in produced.json()["messagePublishResults"]}
                assert codes <= {0, 2}
            exists = raw.get(paths.namespace("race", ns)) is not None
            assert exists == (deleted.status_code == 409)
            if exists:
                # the topic won: the namespace is whole, usable and not marked
                assert http.get(f"/admin/v2/namespaces/race/{ns}").json()["deleted"] is False
                assert http.delete(f"/admin/v2/namespaces/race/{ns}",
                                   params={"force": "true"}).status_code == 204
            # re-created, the namespace starts empty: nothing of the old topic comes back
            assert http.put(f"/admin/v2/namespaces/race/{ns}").status_code == 204
            assert http.get(f"/admin/v2/persistent/race/{ns}").json() == []
            assert http.delete(f"/admin/v2/namespaces/race/{ns}").status_code == 204
    stray, unowned = orphans(raw)
    assert stray == [] and unowned == set(), (stray, unowned, seen)
    log = server_log(server)
    assert "Traceback" not in log
    assert [line for line in log.splitlines() if '" 500' in line] == [], seen


def test_topic_create_and_produce_into_a_marked_namespace(
        racing: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = racing
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.put("/admin/v2/namespaces/race/marked").status_code == 204
        assert produce(http, "marked/before").status_code == 200
        key = paths.namespace("race", "marked")
        policies = json.loads(raw.get(key) or b"{}")
        raw.put(key, {**policies, "deleted": True})
        wait_until(lambda: http.get("/admin/v2/namespaces/race/marked").json()["deleted"])
        created = http.put("/admin/v2/persistent/race/marked/new")
        assert (created.status_code, created.json()) == (404, NAMESPACE_DELETED)
        # an existing topic and a new one alike
        for topic in ("marked/before", "marked/new"):
            produced = produce(http, topic)
            assert (produced.status_code, produced.json()) == (404, NAMESPACE_DELETED)
        assert http.get("/admin/v2/persistent/race/marked").json() == [
            "persistent://race/marked/before"]
        stats = http.get("/admin/v2/persistent/race/marked/before/internalStats").json()
        assert stats["numberOfEntries"] == 2
        raw.put(key, {**policies, "deleted": False})
        wait_until(lambda: not http.get("/admin/v2/namespaces/race/marked").json()["deleted"])
        assert http.put("/admin/v2/persistent/race/marked/new").status_code == 204
        assert http.delete("/admin/v2/namespaces/race/marked",
                           params={"force": "true"}).status_code == 204


def test_topic_delete_against_produce(racing: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = racing
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.put("/admin/v2/namespaces/race/topics").status_code == 204
        for i in range(ROUNDS):
            topic = f"topics/t{i % 10}"
            assert produce(http, topic).status_code == 200  # the topic exists, open
            deleted, produced = at_once(
                lambda topic=topic: http.delete(  # type: ignore[misc]
                    f"/admin/v2/persistent/race/{topic}", params={"force": "true"}),
                lambda topic=topic: produce(http, topic),  # type: ignore[misc]
            )
            assert deleted.status_code in (204, 404), deleted.text
            assert produced.status_code in (200, 404, 409), produced.text
            if produced.status_code == 200:
                for result in produced.json()["messagePublishResults"]:
                    assert result["errorCode"] in (0, 2)
                    if result["errorCode"] == 0:  # stored: readable while the topic lives
                        ledger, entry, _ = result["messageId"].split(":")
                        read = http.get(f"/admin/v2/persistent/race/{topic}/ledger/{ledger}"
                                        f"/entry/{entry}")
                        assert read.status_code in (200, 404)
        assert http.delete("/admin/v2/namespaces/race/topics",
                           params={"force": "true"}).status_code == 204
    stray, unowned = orphans(raw)
    assert stray == [] and unowned == set(), (stray, unowned)
    log = server_log(server)
    assert "Traceback" not in log and " 500 " not in log
