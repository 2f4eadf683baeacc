"""`/admin/v2/storage/bookies` and `pulsar-admin storage` on a service supervising two bookies
on free ports (`--bookies 2 --bookie-port 0`), with its own etcd; and a kill -9 of such a
service (its bookies die with it) while `pulsar-client produce` runs."""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.services.storage_bookies import registration_wait
from cli.main import main as pulsar_admin
from metastore.embedded import EmbeddedEtcd
from metastore.paths import bookie_available, bookie_readonly
from tests.support import RawEtcd, ServerProcess, wait_until

BOOKIES = "/admin/v2/storage/bookies"
ELSEWHERE = "10.0.0.9:3181"  # in the rack map only


@pytest.fixture(scope="module")
def supervising(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, RawEtcd]]:
    workdir = tmp_path_factory.mktemp("storadmin")
    etcd = EmbeddedEtcd(workdir / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, workdir / "service",
                           extra_args=["--bookies", "2", "--bookie-port", "0",
                                       "--data-dir", str(workdir / "data")])  # fmt: skip
    try:
        server.start()
        yield server, RawEtcd(etcd.endpoint)
    finally:
        server.stop()
        etcd.stop()


def running_bookies(http: httpx.Client) -> list[str]:
    """The registered (writable) bookies, through BookKeeper's HTTP admin."""
    return list(http.get("/api/v1/bookie/list_bookies", params={"type": "rw"}).json())


def listed(http: httpx.Client) -> dict[str, dict[str, Any]]:
    response = http.get(BOOKIES)
    assert response.status_code == 200, response.text
    return {b["id"]: b for b in response.json()}


def listening(bookie_id: str) -> bool:
    host, _, port = bookie_id.rpartition(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def cli(url: str, *args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        pulsar_admin(["--admin-url", url, *args])
    return out.getvalue()


def test_ready_line_comes_after_the_bookies_registered(
    supervising: tuple[ServerProcess, RawEtcd],
) -> None:
    server, raw = supervising
    log = server.workdir / "server.log"
    wait_until(lambda: "ready:" in log.read_text(), 60)
    [ready] = [line for line in log.read_text().splitlines() if "ready:" in line]
    bookie_ids = ready.split(", bookies ", 1)[1].split()
    assert len(bookie_ids) == 2
    # Read at once, no waiting: the line is only written after both registered.
    registered = set(raw.keys("/ledgers/available/"))
    assert all(
        bookie_available(b) in registered or bookie_readonly(b) in registered for b in bookie_ids
    ), registered
    assert raw.get("/ledgers/INSTANCEID") is not None  # the /ledgers root was set up


def test_list_stop_start_and_readonly(supervising: tuple[ServerProcess, RawEtcd]) -> None:
    server, raw = supervising
    with httpx.Client(base_url=server.url, timeout=30) as http:
        wait_until(lambda: len(running_bookies(http)) == 2, 30)
        ids = sorted(listed(http))
        assert len(ids) == 2 and all(b.startswith("127.0.0.1:") for b in ids)
        assert all(b != "127.0.0.1:3181" for b in ids)  # free ports, ids follow them
        first, second = ids
        for bookie, rack, group in ((first, "/r1", "iso"), (ELSEWHERE, "/r9", "far")):
            http.post(f"/admin/v2/bookies/racks-info/{bookie}", params={"group": group},
                      json={"rack": rack}).raise_for_status()  # fmt: skip
        bookies = listed(http)
        assert bookies[first] | {"diskUsed": 0} == {
            "id": first, "state": "writable", "rack": "/r1", "group": "iso",
            "supervised": True, "diskUsed": 0, "diskCapacity": bookies[first]["diskCapacity"],
            "ledgers": 0,
        }  # fmt: skip
        assert bookies[first]["diskUsed"] > 0 and bookies[first]["diskCapacity"] > 0
        assert bookies[ELSEWHERE] == {
            "id": ELSEWHERE, "state": "stopped", "rack": "/r9", "group": "far",
            "supervised": False, "diskUsed": None, "diskCapacity": None, "ledgers": 0,
        }  # fmt: skip

        # A produced message puts a ledger on both bookies (E=2 by default).
        sent = http.post("/topics/persistent/public/default/t",
                         json={"messages": [{"payload": "hello"}]})  # fmt: skip
        assert sent.status_code == 200, sent.text
        assert {b["ledgers"] for b in listed(http).values() if b["supervised"]} == {1}

        # Read-only: the registration moves, the bookie keeps running.
        assert cli(server.url, "storage", "readonly", "-b", first) == ""
        assert raw.get(bookie_readonly(first)) is not None
        assert raw.get(bookie_available(first)) is None
        assert listed(http)[first]["state"] == "read-only"

        # Stop: unclean, the registration gone at once (lease revoked), not restarted.
        assert http.post(f"{BOOKIES}/{first}/stop").status_code == 204
        assert raw.get(bookie_readonly(first)) is None
        assert listed(http)[first]["state"] == "stopped"
        assert not listening(first)
        deadline = time.monotonic() + 2  # the supervisor checks every 0.5 s
        while time.monotonic() < deadline:
            assert not listening(first), "the supervisor restarted a bookie stopped on request"
            time.sleep(0.1)
        again = http.post(f"{BOOKIES}/{first}/stop")
        assert again.status_code == 409 and "already stopped" in again.json()["reason"]
        assert http.post(f"{BOOKIES}/{first}/readonly").status_code == 409

        # Start: back, still read-only (the flag file stays), its data replayed.
        assert cli(server.url, "storage", "start", "-b", first) == ""
        assert listed(http)[first]["state"] == "read-only" and listening(first)
        running = http.put(f"{BOOKIES}/{second}")
        assert running.status_code == 409 and "already running" in running.json()["reason"]
        assert '"state" : "writable"' in cli(server.url, "storage", "bookies")

        # Errors in Pulsar's shape: unknown 404, known but not ours 412.
        for method in ("PUT", "POST"):
            suffix = "" if method == "PUT" else "/stop"
            unknown = http.request(method, f"{BOOKIES}/10.0.0.1:1{suffix}")
            assert unknown.status_code == 404 and "does not exist" in unknown.json()["reason"]
            foreign = http.request(method, f"{BOOKIES}/{ELSEWHERE}{suffix}")
            assert foreign.status_code == 412 and "not supervised" in foreign.json()["reason"]


def test_data_dirs_follow_the_ports(supervising: tuple[ServerProcess, RawEtcd]) -> None:
    server, _ = supervising
    data = Path(server.command()[server.command().index("--data-dir") + 1])
    with httpx.Client(base_url=server.url) as http:
        ours = [b for b, status in listed(http).items() if status["supervised"]]
    ports = sorted(int(b.rpartition(":")[2]) for b in ours)
    assert sorted(int(p.name.removeprefix("bookie-")) for p in data.glob("bookie-*")
                  if p.is_dir()) == ports  # fmt: skip


@pytest.mark.slow
def test_kill_9_of_the_service_mid_pulsar_client_produce_loses_no_acknowledged_message(
    tmp_path: Path,
) -> None:
    """The service and its supervised bookies (`--bookies 2 --bookie-port 0`) crash together
    while `pulsar-client produce` runs; restarted on the same data directory the bookies keep
    their ports (ids), and every batch pulsar-client saw acknowledged reads back in order."""
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    etcd.start()
    args = ["--bookies", "2", "--bookie-port", "0", "--data-dir", str(tmp_path / "data")]
    server = ServerProcess(etcd.url, tmp_path / "service", extra_args=args)
    client_tool = str(Path(sys.executable).parent / "pulsar-client")
    topic = "persistent://public/default/crash"
    acked: list[list[str]] = []
    in_flight: list[str] = []
    stop = threading.Event()

    def produce_loop() -> None:
        i = 0
        while not stop.is_set():
            batch = [f"b{i}-{j}-" + "x" * (i % 7) for j in range(50)]
            in_flight[:] = batch
            command = [client_tool, "--url", server.url, "produce", topic, "-m", ",".join(batch)]
            done = subprocess.run(command, capture_output=True, timeout=60)
            if done.returncode != 0:
                return
            acked.append(batch)
            i += 1

    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_until(lambda: len(running_bookies(http)) == 2, 30)
            ids_before = sorted(b["id"] for b in http.get(BOOKIES).json())
        thread = threading.Thread(target=produce_loop)
        thread.start()
        try:
            wait_until(lambda: len(acked) >= 4, timeout=60)
            server.kill()
        finally:
            stop.set()
            thread.join(timeout=60)
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_until(lambda: len(running_bookies(http)) == 2, 30)
            assert sorted(b["id"] for b in http.get(BOOKIES).json()) == ids_before
            command = [client_tool, "--url", server.url, "produce", topic, "-m", "after-restart"]
            after = subprocess.run(command, capture_output=True, text=True, timeout=60)
            assert after.returncode == 0, after.stderr
            stats = http.get("/admin/v2/persistent/public/default/crash/internalStats").json()
            payloads = []
            # closed ledgers carry their counts; the open (last) one's is currentLedgerEntries
            counts = [ledger["entries"] for ledger in stats["ledgers"][:-1]]
            counts.append(stats["currentLedgerEntries"])
            for ledger, count in zip(stats["ledgers"], counts, strict=True):
                for entry in range(count):
                    got = http.get(f"/admin/v2/persistent/public/default/crash/ledger/"
                                   f"{ledger['ledgerId']}/entry/{entry}")  # fmt: skip
                    assert got.status_code == 200, got.text
                    payloads.append(got.content.decode())
    finally:
        server.stop()
        etcd.stop()
    sent = [message for batch in acked for message in batch]
    assert payloads[: len(sent)] == sent  # every acknowledged message, in order, byte for byte
    rest = payloads[len(sent):]
    assert rest[-1] == "after-restart"
    assert rest[:-1] == in_flight[: len(rest) - 1]  # of the batch cut short, a prefix at most


def test_registration_wait_stays_below_the_request_deadline() -> None:
    """A start or read-only switch waits for the registration at most 80% of the request
    deadline (15 s at most), so a slow bookie gets its answer before the 503 of the deadline."""
    assert registration_wait(5) == pytest.approx(4.0)  # the service's default deadline
    assert registration_wait(1) == pytest.approx(0.8)
    assert registration_wait(30) == pytest.approx(15.0)


def test_start_and_readonly_with_a_one_second_request_deadline(tmp_path: Path) -> None:
    """With the shortest request deadline (1 s, a 0.8 s registration wait), stop, start and
    read-only still answer 204, never a 503, and the bookie ends up as asked."""
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    etcd.start()
    server = ServerProcess(etcd.url, tmp_path / "service",
                           extra_conf={"metadataStoreOperationTimeoutSeconds": "1"},
                           extra_args=["--bookies", "1", "--bookie-port", "0",
                                       "--data-dir", str(tmp_path / "data")])  # fmt: skip
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_until(lambda: next(iter(listed(http).values()))["state"] == "writable", 30)
            [bookie] = listed(http)
            assert http.post(f"{BOOKIES}/{bookie}/stop").status_code == 204
            started = http.put(f"{BOOKIES}/{bookie}")
            assert started.status_code == 204, started.text
            wait_until(lambda: listed(http)[bookie]["state"] == "writable", 30)
            again = http.put(f"{BOOKIES}/{bookie}")
            assert again.status_code == 409 and "already running" in again.json()["reason"]
            switched = http.post(f"{BOOKIES}/{bookie}/readonly")
            assert switched.status_code == 204, switched.text
            wait_until(lambda: listed(http)[bookie]["state"] == "read-only", 30)
    finally:
        server.stop()
        etcd.stop()
