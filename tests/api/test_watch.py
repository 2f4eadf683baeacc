"""`GET /admin/v2/watch` (Server-Sent Events from an etcd watch) against the real server and
etcd: resuming after connections killed mid-stream while writers run gives exactly etcd's
history of the watched keys, a compacted revision gives `event: resync`, bad parameters 400."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support import RawEtcd, ServerProcess

BOOKIE_RANGE = ("/bookies", "/ledgers/available0")


@dataclass(frozen=True)
class Sse:
    event: str
    data: str
    id: str | None


def sse_events(lines: Iterator[str]) -> Iterator[Sse]:
    """Events of a `text/event-stream` (comments skipped), as an EventSource parses them."""
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line == "":
            if "data" in fields or "event" in fields:
                ident = fields.get("id")
                yield Sse(
                    fields.get("event", ["message"])[-1],
                    "\n".join(fields.get("data", [])),
                    ident[-1] if ident else None,
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))


def state_at(raw: RawEtcd, revision: int) -> dict[str, tuple[Any, int]]:
    """Every watched key of the bookies range at `revision`: value and mod revision."""
    found = {}
    for key, (value, modified) in raw.range_at(*BOOKIE_RANGE, revision).items():
        if key == "/bookies" or key.startswith("/ledgers/available/"):
            found[key] = (json.loads(value) if key == "/bookies" else None, modified)
    return found


def etcd_history(raw: RawEtcd, after: int, last: int) -> list[tuple[int, str, str]]:
    """(revision, type, key) of every change of the watched keys in (after, last], from etcd's
    own reads at each revision."""
    history = []
    before = state_at(raw, after)
    for revision in range(after + 1, last + 1):
        now = state_at(raw, revision)
        for key in sorted(now.keys() | before.keys()):
            if key not in now:
                history.append((revision, "delete", key))
            elif now[key][1] == revision:
                history.append((revision, "put", key))
        before = now
    return history


def write_storm(server: ServerProcess, raw: RawEtcd, writers: int, each: int) -> None:
    """Concurrent writers: rack writes through the server, registrations straight to etcd."""

    def racks(n: int) -> None:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            for i in range(each):
                bookie = f"10.0.{n}.{i}:3181"
                response = client.post(
                    f"/admin/v2/bookies/racks-info/{bookie}",
                    params={"group": "default"},
                    json={"rack": f"/rack{i % 3}"},
                )
                assert response.status_code == 204, response.text
                if i % 4 == 3:
                    assert client.delete(f"/admin/v2/bookies/racks-info/{bookie}").is_success

    def registrations(n: int) -> None:
        for i in range(each):
            raw.put(f"/ledgers/available/10.1.{n}.{i}:3181", b"")
            if i % 3 == 2:
                raw.delete(f"/ledgers/available/10.1.{n}.{i}:3181")

    threads = [threading.Thread(target=racks, args=(n,)) for n in range(writers)]
    threads += [threading.Thread(target=registrations, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_resumes_without_gap_or_duplicate_after_killed_connections(
    server: ServerProcess, clean_store: RawEtcd
) -> None:
    raw = clean_store
    start = raw.revision() + 1
    storm = threading.Thread(target=write_storm, args=(server, raw, 3, 30))
    seen: list[tuple[int, str, str]] = []
    values: dict[int, Any] = {}
    since, cuts, final = start, 0, None
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=server.url, timeout=httpx.Timeout(10, read=2)) as client:
        storm.start()
        while final is None or since <= final:
            assert time.monotonic() < deadline, (since, final, len(seen))
            if final is None and not storm.is_alive():
                final = raw.revision()
            params = {"prefix": "bookies", "since": str(since)}
            with (
                contextlib.suppress(httpx.ReadTimeout),  # quiet for 2 s: reconnect
                client.stream("GET", "/admin/v2/watch", params=params) as response,
            ):
                    assert response.status_code == 200
                    assert response.headers["content-type"].startswith("text/event-stream")
                    for count, event in enumerate(sse_events(response.iter_lines()), 1):
                        assert event.event in ("put", "delete"), event
                        data = json.loads(event.data)
                        assert event.id == str(data["revision"])
                        seen.append((data["revision"], data["type"], data["key"]))
                        if data["key"] == "/bookies":
                            values[data["revision"]] = data["value"]
                        since = data["revision"] + 1
                        if final is not None and since > final:
                            break
                        if count == 7:  # kill the connection mid-stream, writers running
                            cuts += 1
                            break
    storm.join()
    assert cuts >= 3
    expected = etcd_history(raw, start - 1, final)
    assert len(expected) >= 3 * 30 * 2
    assert sorted(seen) == expected  # every change, none twice
    assert [r for r, _, _ in seen] == sorted(r for r, _, _ in seen)  # in revision order
    for revision, value in values.items():  # the decoded documents are etcd's
        if value is not None:
            assert value == state_at(raw, revision)["/bookies"][0]


def test_a_compacted_revision_gives_resync(server: ServerProcess, clean_store: RawEtcd) -> None:
    raw = clean_store
    raw.put("/bookies", {"default": {"10.9.0.1:3181": {"rack": "/r1"}}})
    old = raw.revision()
    raw.put("/bookies", {"default": {"10.9.0.1:3181": {"rack": "/r2"}}})
    compacted_at = raw.revision()
    raw.compact(compacted_at)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        with client.stream(
            "GET", "/admin/v2/watch", params={"prefix": "bookies", "since": str(old)}
        ) as response:
            assert response.status_code == 200
            events = list(sse_events(response.iter_lines()))  # the stream ends by itself
        # a browser's reconnect (Last-Event-ID) lands on the same answer
        with client.stream(
            "GET",
            "/admin/v2/watch",
            params={"prefix": "bookies"},
            headers={"Last-Event-ID": str(old - 1)},
        ) as response:
            again = list(sse_events(response.iter_lines()))
    assert [e.event for e in events] == ["resync"]
    data = json.loads(events[0].data)
    assert data["reason"] == "compacted"
    assert data["compactRevision"] == compacted_at
    assert data["revision"] >= compacted_at
    assert [e.event for e in again] == ["resync"]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"prefix": "ledgers"}, "Invalid prefix 'ledgers'"),
        ({"prefix": "bookies", "since": "0"}, "Invalid since '0'"),
        ({"prefix": "bookies", "since": "abc"}, "Invalid since 'abc'"),
        ({}, "Invalid request: query.prefix"),
    ],
)
def test_bad_parameters_answer_400(
    server: ServerProcess, params: dict[str, str], reason: str
) -> None:
    response = httpx.get(f"{server.url}/admin/v2/watch", params=params, timeout=10)
    assert response.status_code == 400
    assert response.json()["reason"].startswith(reason)
