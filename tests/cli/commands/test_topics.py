"""`pulsar-admin topics` and `pulsar-client produce` as subprocesses against the service with
real bookies (the session's `topic_service`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Run, clean_env, run_cli
from tests.support import ServerProcess

PULSAR_CLIENT = str(Path(sys.executable).parent / "pulsar-client")


def admin(service: ServerProcess, *args: str) -> Run:
    return run_cli("--admin-url", service.url, *args)


def client(service: ServerProcess, *args: str) -> Run:
    done = subprocess.run([PULSAR_CLIENT, "--url", service.url, *args], capture_output=True,
                          text=True, env=clean_env(), timeout=120)
    return Run(done.returncode, done.stdout, done.stderr)


def test_topic_commands(topic_service: ServerProcess) -> None:
    topic = "persistent://acme/plain/cli-topic"
    assert admin(topic_service, "topics", "create", topic).code == 0
    produced = client(topic_service, "produce", topic, "-m", "hello,wörld", "-n", "3")
    assert produced.code == 0, produced.err
    assert produced.out.strip() == "6 messages successfully produced"

    stats = admin(topic_service, "topics", "stats-internal", topic, "-m")
    assert stats.code == 0
    data = json.loads(stats.out)
    assert data["numberOfEntries"] == 6
    assert all("metadata" in ledger for ledger in data["ledgers"])
    last_ledger, last_entry = map(int, data["lastConfirmedEntry"].split(":"))

    latest = admin(topic_service, "topics", "examine-message", topic)
    assert latest.code == 0, latest.err
    lines = latest.out.splitlines()
    assert lines[0] == f"Message ID: {last_ledger}:{last_entry}"
    assert lines[1].startswith("Publish time: 1") and lines[2] == "Event time: 0"
    assert "|00000000| 77 c3 b6 72 6c 64" in latest.out  # "wörld"
    first = admin(topic_service, "topics", "examine-message", topic, "-i", "earliest", "-m", "1")
    assert "|hello           |" in first.out
    by_id = admin(topic_service, "topics", "get-message-by-id", topic, "-l", str(last_ledger),
                  "-e", str(last_entry))
    assert by_id.code == 0
    assert by_id.out.splitlines() == [*lines[:3], "Redelivery count: 0", *lines[3:]]

    assert admin(topic_service, "topics", "delete", topic).code == 0
    gone = admin(topic_service, "topics", "delete", topic)
    assert (gone.code, gone.err) == (0, "")
    assert gone.out == (f"Failed to delete topic: {topic}. Exception: org.apache.pulsar.client."
                        f"admin.PulsarAdminException$NotFoundException: Topic {topic} not found\n")


def test_produce_many_with_a_separator_and_bad_targets(topic_service: ServerProcess) -> None:
    topic = "persistent://acme/plain/bulk"
    many = client(topic_service, "produce", topic, "-m", "a|b|c|d", "-s", "|", "-n", "300")
    assert many.code == 0, many.err
    assert many.out.strip() == "1200 messages successfully produced"
    assert "Producing" in many.err  # the progress bar, on stderr
    listed = admin(topic_service, "topics", "list", "acme/plain")
    assert topic in listed.out.splitlines()
    nowhere = client(topic_service, "produce", "persistent://nobody/ns/t", "-m", "x")
    assert nowhere.code == 1 and "Namespace does not exist" in nowhere.err
