"""BookKeeper's auto-recovery admin paths on the real server (its own etcd): the bodies and
status codes a bookie's HTTP server gives, the CLI's `storage` group over them, and a
service with `autoRecoveryDaemonEnabled` elected auditor whose worker clears marks of
ledgers that no longer exist."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.underreplication_marks import UnderreplicatedLedger, encode_underreplicated_ledger
from tests.cli.conftest import ok, run_cli
from tests.support import RawEtcd, ServerProcess, wait_until

UR = "/api/v1/autorecovery"


@pytest.fixture(scope="module")
def own_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    server = EmbeddedEtcd(tmp_path_factory.mktemp("ur-etcd"))
    server.start()
    yield server
    server.stop()


def test_autorecovery_paths_cli_and_an_elected_auditor(own_etcd: EmbeddedEtcd,
                                                       tmp_path: Path) -> None:
    raw = RawEtcd(own_etcd.endpoint)
    plain = ServerProcess(own_etcd.url, tmp_path / "plain").start()
    try:
        with httpx.Client(base_url=plain.url, timeout=10) as http:
            answer = http.get(f"{UR}/who_is_auditor/")
            assert (answer.status_code, answer.text) == (404, "No auditor elected")
            answer = http.get(f"{UR}/list_under_replicated_ledger/")
            assert (answer.status_code, answer.text) == (404, "No under replicated ledgers found")
            answer = http.get(f"{UR}/trigger_audit")
            assert (answer.status_code, answer.text) == (
                404, "Not found method. Should be PUT method")

            for ledger_id, bookie in ((7, "10.0.0.1:3181"), (9, "10.0.0.2:3181")):
                raw.put(paths.underreplicated_ledger(ledger_id), encode_underreplicated_ledger(
                    UnderreplicatedLedger((bookie,), 1700000000000)))
            answer = http.get(f"{UR}/list_under_replicated_ledger/")
            assert (answer.status_code, answer.text) == (200, "[ 7, 9 ]")
            assert "content-type" not in answer.headers
            answer = http.get(f"{UR}/list_under_replicated_ledger/",
                              params={"printmissingreplica": ""})
            assert answer.text == ('{\n  "7" : [ "10.0.0.1:3181" ],\n'
                                   '  "9" : [ "10.0.0.2:3181" ]\n}')
            assert http.get(f"{UR}/list_under_replicated_ledger",
                            params={"missingreplica": "10.0.0.1:3181"}).text == "[ 7 ]"
            assert http.get(f"{UR}/list_under_replicated_ledger",
                            params={"excludingmissingreplica": "10.0.0.1:3181"}).text == "[ 9 ]"

            cli = ("--admin-url", plain.url, "storage")
            assert ok(run_cli(*cli, "under-replicated", cwd=tmp_path)) == "7\n9\n"
            assert '"10.0.0.2:3181"' in ok(run_cli(*cli, "under-replicated",
                                                   "--print-missing-replica", cwd=tmp_path))

            answer = http.put(f"{UR}/trigger_audit")
            assert (answer.status_code, answer.text) == (200, "Success trigger audit.")
            assert raw.get(f"{paths.UNDERREPLICATION}/lostBookieRecoveryDelay") == b"0"
    finally:
        plain.stop()

    recovering = ServerProcess(own_etcd.url, tmp_path / "recovering", extra_conf={
        "autoRecoveryDaemonEnabled": "true",
        "metadataStoreSessionTimeoutMillis": "2000",
    }).start()
    try:
        with httpx.Client(base_url=recovering.url, timeout=10) as http:
            answer = wait_until(lambda: (r := http.get(f"{UR}/who_is_auditor")).status_code
                                == 200 and r, timeout=20)
            assert answer.text == f"Auditor: localhost:{recovering.port}"
            assert ok(run_cli("--admin-url", recovering.url, "storage", "who-is-auditor",
                              cwd=tmp_path)) == f"Auditor: localhost:{recovering.port}\n"
            # ledgers 7 and 9 do not exist: the worker marks them replicated
            wait_until(lambda: http.get(f"{UR}/list_under_replicated_ledger").status_code
                       == 404, timeout=20)
            assert ok(run_cli("--admin-url", recovering.url, "storage", "under-replicated",
                              cwd=tmp_path)) == "No under replicated ledgers found\n"
            assert ok(run_cli("--admin-url", recovering.url, "storage", "trigger-audit",
                              cwd=tmp_path)) == "Success trigger audit.\n"
    finally:
        recovering.stop()
    # a stopped service gives up its election: its lease is revoked on the way out
    wait_until(lambda: raw.get(f"{paths.UNDERREPLICATION}/leader") is None, timeout=10)
