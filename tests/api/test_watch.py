"""`GET /admin/v2/watch` (Server-Sent Events from an etcd watch) against the real server and
etcd: resuming after connections killed mid-stream while writers run gives exactly etcd's
history of the watched keys, a compacted revision gives `event: resync`, bad parameters 400."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from tests.cli.conftest import PULSAR_ADMIN, clean_env, run_cli
from tests.support import CuttableProxy, RawEtcd, ServerProcess, wait_until

BOOKIE_RANGE = ("/bookies", "/ledgers/available0")
END_MARK = "/ledgers/available/zz-end:3181"


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


def etcd_history(raw: RawEtcd, start: int, last: int) -> list[tuple[int, str, str]]:
    """(revision, type, key) of every change of the watched keys from `start` to `last`, as
    etcd's own watch reports them."""
    changes = raw.history(*BOOKIE_RANGE, start, last)
    return [c for c in changes if c[2] == "/bookies" or c[2].startswith("/ledgers/available/")]


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
    watchers = raw.watchers()
    start = raw.revision() + 1
    storm = threading.Thread(target=write_storm, args=(server, raw, 2, 16))
    seen: list[tuple[int, str, str]] = []
    values: dict[int, Any] = {}
    since, cuts, final = start, 0, None
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=server.url, timeout=httpx.Timeout(10, read=2)) as client:
        storm.start()
        while final is None or since <= final:
            assert time.monotonic() < deadline, (since, final, len(seen))
            if final is None and not storm.is_alive():
                raw.put(END_MARK, b"")  # the last change: read until it
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
                        if count == 5:  # kill the connection mid-stream, writers running
                            cuts += 1
                            break
    storm.join()
    assert cuts >= 3
    # every killed connection let go of its etcd watch
    wait_until(lambda: raw.watchers() == watchers, timeout=10)
    expected = etcd_history(raw, start, final)
    assert len(expected) >= 2 * 16 * 2
    assert sorted(seen) == expected  # every change, none twice
    assert [r for r, _, _ in seen] == sorted(r for r, _, _ in seen)  # in revision order
    last_rack_map = max(values)  # the decoded document is etcd's
    assert values[last_rack_map] == state_at(raw, last_rack_map)["/bookies"][0]


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
    ("params", "headers", "reason"),
    [
        ({"prefix": "topics"}, {}, "Invalid prefix 'topics'"),
        ({"prefix": "bookies", "since": "0"}, {}, "Invalid since '0'"),
        ({"prefix": "bookies", "since": "abc"}, {}, "Invalid since 'abc'"),
        ({"prefix": "bookies", "since": str(2**63)}, {}, "Invalid since"),
        ({"prefix": "bookies"}, {"Last-Event-ID": "-1"}, "Invalid Last-Event-ID '-1'"),
        ({}, {}, "Invalid request: query.prefix"),
    ],
)
def test_bad_parameters_answer_400(
    server: ServerProcess, params: dict[str, str], headers: dict[str, str], reason: str
) -> None:
    response = httpx.get(
        f"{server.url}/admin/v2/watch", params=params, headers=headers, timeout=10
    )
    assert response.status_code == 400
    assert response.json()["reason"].startswith(reason)


class Lines:
    """A subprocess's stdout lines, collected by a thread; waited on with a bound."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, count: int) -> list[str]:
        wait_until(lambda: len(self.lines) >= count, timeout=20)
        return list(self.lines)


def test_cli_watch_resumes_after_a_cut_and_reports_resync(
    server: ServerProcess, clean_store: RawEtcd, tmp_path: Path
) -> None:
    raw = clean_store
    start = raw.revision() + 1
    proxy = CuttableProxy(server.port)
    command = [PULSAR_ADMIN, "--admin-url", f"http://127.0.0.1:{proxy.port}", "bookies", "watch"]
    watcher = subprocess.Popen(
        [*command, "--since", str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
    )
    try:
        assert watcher.stdout is not None and watcher.stderr is not None
        out = Lines(watcher.stdout)
        with httpx.Client(base_url=server.url, timeout=10) as client:
            rack = client.post(
                "/admin/v2/bookies/racks-info/10.2.0.1:3181",
                params={"group": "default"},
                json={"rack": "/r1"},
            )
            assert rack.status_code == 204
            first = out.wait_for(1)
            assert first[0].startswith(f"{raw.revision()} put /bookies ")
            assert json.loads(first[0].split(" ", 3)[3]) == raw.get_json("/bookies")
            assert proxy.cut() >= 2  # the watch's connection, both sides
            raw.put("/ledgers/available/10.2.0.2:3181", b"")  # while it reconnects
            raw.delete("/ledgers/available/10.2.0.2:3181")
            assert client.delete("/admin/v2/bookies/racks-info/10.2.0.1:3181").is_success
        last = raw.revision()
        lines = out.wait_for(4)
        expected = etcd_history(raw, start, last)
        printed = [tuple(line.split(" ", 3)[:3]) for line in lines]
        assert printed == [(str(r), kind, key) for r, kind, key in expected]
        registration = {  # a legacy (empty) registration, decoded as BookKeeper derives it
            "endpoints": [
                {
                    "id": "10.2.0.2:3181",
                    "host": "10.2.0.2",
                    "port": 3181,
                    "protocol": "bookie-rpc",
                    "auth": [],
                    "extensions": [],
                }
            ],
            "properties": {},
        }
        assert lines[1:3] == [
            f"{expected[1][0]} put /ledgers/available/10.2.0.2:3181 "
            + json.dumps(registration, separators=(",", ":")),
            f"{expected[2][0]} delete /ledgers/available/10.2.0.2:3181",
        ]
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
        proxy.close()
    assert "Watch connection lost" in watcher.stderr.read()
    assert len(out.lines) == 4  # nothing twice
    # a compacted revision: one `resync` line, exit status 1 with what to do on stderr
    raw.compact(raw.revision())
    resync = run_cli("--admin-url", server.url, "bookies", "watch", "--since", str(start))
    assert resync.code == 1
    assert resync.out.startswith(f"resync compacted revision={raw.revision()} compactRevision=")
    assert "re-read the current state" in resync.err


def test_policies_stream_from_now_holds_only_policy_keys(
    server: ServerProcess, clean_store: RawEtcd
) -> None:
    raw = clean_store
    raw.put("/admin/policies/t0", {"adminRoles": []})  # before the watch: not sent
    params = {"prefix": "policies"}
    with (
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("GET", "/admin/v2/watch", params=params) as response,
    ):
        lines = response.iter_lines()
        assert next(lines).startswith(": watching policies from revision ")
        raw.put("/admin/clusters/c1", {"serviceUrl": "http://c1:8080"})  # clusters, not here
        raw.put("/admin/clusters/c1/namespaceIsolationPolicies", {"p1": {}})
        raw.put("/admin/local-policies/t1/ns1", {"bookieAffinityGroup": {}})
        raw.delete("/admin/policies/t0")
        events = []
        for event in sse_events(lines):
            events.append((event.event, json.loads(event.data)["key"]))
            if len(events) == 3:
                break
    assert events == [
        ("put", "/admin/clusters/c1/namespaceIsolationPolicies"),
        ("put", "/admin/local-policies/t1/ns1"),
        ("delete", "/admin/policies/t0"),
    ]


def test_ledgers_stream_holds_only_ledger_metadata_keys(
    server: ServerProcess, clean_store: RawEtcd
) -> None:
    raw = clean_store
    with (
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("GET", "/admin/v2/watch", params={"prefix": "ledgers"}) as response,
    ):
        lines = response.iter_lines()
        assert next(lines).startswith(": watching ledgers from revision ")
        raw.put("/ledgers/available/10.0.0.1:3181", b"")  # a registration: `bookies` only
        raw.put("/ledgers/idgen/ID-0000000001", b"")  # the id generator: not a ledger
        raw.put("/ledgers/00/0000/L0001", b"BookieMetadataFormatVersion\t3\n")
        raw.put("/ledgers/000/0000/0021/4748/L3653", b"x")  # a long ledger id's key
        raw.delete("/ledgers/00/0000/L0001")
        events = []
        for event in sse_events(lines):
            data = json.loads(event.data)
            events.append((event.event, data["key"], data["value"]))
            if len(events) == 3:
                break
    assert events == [
        ("put", "/ledgers/00/0000/L0001", {"ledgerId": 1}),
        ("put", "/ledgers/000/0000/0021/4748/L3653", {"ledgerId": 2**31 + 5}),
        ("delete", "/ledgers/00/0000/L0001", None),
    ]
