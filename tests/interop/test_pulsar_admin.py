"""Upstream `pulsar-admin` (PulsarAdminTool 4.0.8) and ours, each running the same script of
commands against the service from an empty store: same stdout, stderr and exit code, step by
step, for successes and for the 404, 409 and 412 errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Run, clean_env, run_cli
from tests.interop.upstream import Result, UpstreamJvm
from tests.support import RawEtcd, ServerProcess

PULSAR_CLIENT = str(Path(sys.executable).parent / "pulsar-client")
BOOKIE_1, BOOKIE_2 = "10.0.0.1:3181", "10.0.0.2:3181"

ADMIN_SCRIPT: list[list[str]] = [
    ["clusters", "create", "c1", "--url", "http://c1:8080"],
    ["clusters", "create", "c1", "--url", "http://c1:8080"],  # 409
    ["clusters", "list"],
    ["clusters", "get", "c1"],
    ["clusters", "get", "nope"],  # 404
    ["clusters", "update", "c1", "--url", "http://c1b:8080"],
    ["clusters", "get", "c1"],
    ["clusters", "create-failure-domain", "c1", "--domain-name", "d1",
     "--broker-list", "b1:8080,b2:8080"],
    ["clusters", "create-failure-domain", "c1", "--domain-name", "d1",
     "--broker-list", "b3:8080"],  # 409
    ["clusters", "get-failure-domain", "c1", "--domain-name", "d1"],
    ["clusters", "get-failure-domain", "c1", "--domain-name", "nope"],  # 404
    ["clusters", "update-failure-domain", "c1", "--domain-name", "d1", "--broker-list", "b1:8080"],
    ["clusters", "list-failure-domains", "c1"],
    ["bookies", "set-bookie-rack", "--bookie", BOOKIE_1, "--hostname", "h1", "--group", "g1",
     "--rack", "/r1"],
    ["bookies", "set-bookie-rack", "--bookie", BOOKIE_2, "--hostname", "h2", "--group", "g2",
     "--rack", "/r2"],
    ["bookies", "racks-placement"],
    ["bookies", "get-bookie-rack", "--bookie", BOOKIE_1],
    ["bookies", "get-bookie-rack", "--bookie", "10.9.9.9:3181"],  # 404
    ["bookies", "delete-bookie-rack", "--bookie", BOOKIE_2],
    ["bookies", "racks-placement"],
    ["bookies", "list-bookies"],
    ["ns-isolation-policy", "set", "c1", "p1", "--namespaces", "acme/.*", "--primary", "b1.*",
     "--secondary", "b2.*", "--auto-failover-policy-type", "min_available",
     "--auto-failover-policy-params", "min_limit=1,usage_threshold=80"],
    ["ns-isolation-policy", "get", "c1", "p1"],
    ["ns-isolation-policy", "list", "c1"],
    ["ns-isolation-policy", "get", "c1", "nope"],
    ["ns-isolation-policy", "set", "nope", "p1", "--namespaces", "acme/.*", "--primary", "b1.*",
     "--auto-failover-policy-type", "min_available",
     "--auto-failover-policy-params", "min_limit=1,usage_threshold=80"],
    ["ns-isolation-policy", "delete", "c1", "p1"],
    ["ns-isolation-policy", "list", "c1"],
    ["tenants", "create", "acme", "--allowed-clusters", "c1", "--admin-roles", "r1"],
    ["tenants", "create", "acme", "--allowed-clusters", "c1"],  # 409
    ["tenants", "create", "t2", "--allowed-clusters", "nope"],  # 412
    ["tenants", "list"],
    ["tenants", "get", "acme"],
    ["tenants", "get", "nope"],  # 404
    ["tenants", "update", "acme", "--allowed-clusters", "c1", "--admin-roles", "r2"],
    ["tenants", "get", "acme"],
    ["namespaces", "create", "acme/ns1", "--clusters", "c1"],
    ["namespaces", "create", "acme/ns1"],  # 409
    ["namespaces", "create", "nope/ns1"],  # 404
    ["namespaces", "list", "acme"],
    ["namespaces", "get-clusters", "acme/ns1"],
    ["namespaces", "set-clusters", "acme/ns1", "--clusters", "c1"],
    ["namespaces", "set-clusters", "acme/ns1", "--clusters", "nope"],
    ["namespaces", "get-clusters", "acme/nope"],  # 404
    ["namespaces", "set-bookie-affinity-group", "acme/ns1", "--primary-group", "g1",
     "--secondary-group", "g2"],
    ["namespaces", "get-bookie-affinity-group", "acme/ns1"],
    ["namespaces", "delete-bookie-affinity-group", "acme/ns1"],
    ["namespaces", "get-bookie-affinity-group", "acme/ns1"],  # 404
    ["namespaces", "set-anti-affinity-group", "acme/ns1", "--group", "ag1"],
    ["namespaces", "get-anti-affinity-group", "acme/ns1"],
    ["namespaces", "get-anti-affinity-namespaces", "--cluster", "c1", "--group", "ag1",
     "--tenant", "acme"],
    ["namespaces", "delete-anti-affinity-group", "acme/ns1"],
    ["namespaces", "get-anti-affinity-group", "acme/ns1"],
    ["namespaces", "set-persistence", "acme/ns1", "-e", "2", "-w", "2", "-a", "1", "-r", "0"],
    ["namespaces", "get-persistence", "acme/ns1"],
    ["namespaces", "set-persistence", "acme/ns1", "-e", "1", "-w", "2", "-a", "1", "-r", "0"],
    ["namespaces", "remove-persistence", "acme/ns1"],
    ["namespaces", "get-persistence", "acme/ns1"],
    ["namespaces", "policies", "acme/ns1"],
    ["tenants", "delete", "acme"],  # 409, not empty
    ["clusters", "create", "c2", "--url", "http://c2:8080"],
    ["clusters", "update-peer-clusters", "c1", "--peer-clusters", "c2,nope"],  # 412
    ["clusters", "update-peer-clusters", "c1", "--peer-clusters", "C1"],  # 412, itself
    ["clusters", "update-peer-clusters", "nope", "--peer-clusters", "c2"],  # 404
    ["clusters", "update-peer-clusters", "c1", "--peer-clusters", "c2,c2,"],
    ["clusters", "get-peer-clusters", "c1"],
    ["clusters", "get-peer-clusters", "c2"],  # none set
    ["clusters", "get-peer-clusters", "nope"],  # 404
    ["clusters", "update-peer-clusters", "c1", "--peer-clusters", " "],  # cleared
    ["clusters", "get-peer-clusters", "c1"],
    ["clusters", "delete", "c2"],
    ["namespaces", "delete", "acme/ns1"],
    ["namespaces", "delete", "acme/ns1"],  # 404
    ["tenants", "delete", "acme"],
    ["clusters", "delete-failure-domain", "c1", "--domain-name", "d1"],
    ["clusters", "delete-failure-domain", "c1", "--domain-name", "d1"],  # 404
    ["clusters", "delete", "c1"],
    ["clusters", "delete", "c1"],  # 404
]

Outcome = tuple[int, str, str]

# A partitioned topic's life, run by each tool on a topic of its own (the topic goes after
# the first two words): successes, the client's own checks and the server's refusals.
PARTITIONED_STEPS: list[list[str]] = [
    ["topics", "create-partitioned-topic", "-p", "2", "-m", "owner=team-a,tier=gold", "-m",
     "zone=z1"],
    ["topics", "create-partitioned-topic", "-p", "2"],  # 409
    ["topics", "create-partitioned-topic", "-p", "0"],  # refused by the client
    ["topics", "get-partitioned-topic-metadata"],
    ["topics", "update-partitioned-topic", "-p", "3"],
    ["topics", "update-partitioned-topic", "-p", "1"],  # 422
    ["topics", "update-partitioned-topic", "-p", "0"],  # refused by the client
    ["topics", "get-partitioned-topic-metadata"],
    ["topics", "delete"],  # a partitioned topic: the refusal line
    ["topics", "delete-partitioned-topic", "-f"],
    ["topics", "delete-partitioned-topic"],  # 404
    ["topics", "get-partitioned-topic-metadata"],  # 404
    ["topics", "update-partitioned-topic", "-p", "4"],  # 409, not partitioned
]


def outcome(result: Run | Result) -> Outcome:
    return result.code, result.out, result.err


def differences(script: list[list[str]], run_upstream: Callable[[list[str]], Outcome],
                run_ours: Callable[[list[str]], Outcome], reset: Callable[[], None]) -> list[str]:
    """Every step whose outcome differs, each script run from the state `reset` leaves."""
    reset()
    theirs = [run_upstream(step) for step in script]
    reset()
    ours = [run_ours(step) for step in script]
    report = []
    for step, up, mine in zip(script, theirs, ours, strict=True):
        if up != mine:
            report.append(f"$ pulsar-admin {' '.join(step)}\n"
                          f"  upstream: {up!r}\n  ours:     {mine!r}")
    return report


@pytest.fixture
def client_conf(server: ServerProcess, tmp_path: Path) -> Path:
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={server.url}\n")
    return conf


def test_admin_commands_match_upstream(upstream_admin: UpstreamJvm, server: ServerProcess,
                                       clean_store: RawEtcd, client_conf: Path,
                                       tmp_path: Path) -> None:
    """Every step of the script answers as upstream's pulsar-admin does; and the script
    exercises what it says: upstream parses every step and fails exactly where the server
    answers an error."""
    def upstream(step: list[str]) -> Outcome:
        return outcome(upstream_admin.run("pulsar-admin", str(client_conf), *step))

    def ours(step: list[str]) -> Outcome:
        return outcome(run_cli("--admin-url", server.url, *step, cwd=tmp_path))

    theirs: list[Outcome] = []

    def recorded(step: list[str]) -> Outcome:
        theirs.append(upstream(step))
        return theirs[-1]

    report = differences(ADMIN_SCRIPT, recorded, ours, clean_store.wipe)
    for step, (code, _out, err) in zip(ADMIN_SCRIPT, theirs, strict=True):
        assert not any(word in err for word in ("Usage", "Unknown option", "Missing")), step
        assert (code == 0) == (err == ""), (step, code, err)
    assert sum(code != 0 for code, _out, _err in theirs) >= 17  # the steps marked 404/409/412
    assert not report, "\n".join(report)


def test_topic_commands_match_upstream(upstream_admin: UpstreamJvm, topic_service: ServerProcess,
                                       tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={topic_service.url}\n")
    topic = "persistent://acme/plain/interop"
    produced = subprocess.run(
        [PULSAR_CLIENT, "--url", topic_service.url, "produce", topic, "-m", "hello,wörld", "-n",
         "3"], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert produced.returncode == 0, produced.stderr
    stats = upstream_admin.run("pulsar-admin", str(conf), "topics", "stats-internal", topic)
    ledger, entry = json.loads(stats.out)["lastConfirmedEntry"].split(":")
    partitioned = "persistent://acme/plain/interop-partitioned"
    made = upstream_admin.run("pulsar-admin", str(conf), "topics", "create-partitioned-topic",
                              partitioned, "-p", "3")
    assert made.code == 0, made
    produced = subprocess.run(
        [PULSAR_CLIENT, "--url", topic_service.url, "produce", partitioned, "-m", "a,b", "-n",
         "2"], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert produced.returncode == 0, produced.stderr
    read_only = [
        ["topics", "list", "acme/plain"],
        ["topics", "list", "acme/nope"],
        ["topics", "stats-internal", topic],
        ["topics", "stats-internal", topic, "-m"],
        ["topics", "stats-internal", "persistent://acme/plain/nope"],
        ["topics", "examine-messages", topic],
        ["topics", "examine-messages", topic, "-i", "earliest", "-m", "1"],
        ["topics", "get-message-by-id", topic, "-l", ledger, "-e", entry],
        ["topics", "get-message-by-id", topic, "-l", ledger, "-e", "999"],
        ["topics", "list-partitioned-topics", "acme/plain"],
        ["topics", "list-partitioned-topics", "acme/plain", "-ist"],
        ["topics", "list-partitioned-topics", "acme/nope"],
        ["topics", "get-partitioned-topic-metadata", topic],  # not partitioned: 0
        ["topics", "stats", topic],
        ["topics", "stats", topic, "-gpb", "-sbs", "-etb"],
        ["topics", "stats", "persistent://acme/plain/nope"],
        ["topics", "stats", "persistent://acme/nope/x"],
        ["topics", "stats", partitioned],  # a partitioned topic's own name: 404
        ["topics", "stats", partitioned + "-partition-1"],
        ["topics", "partitioned-stats", partitioned],
        ["topics", "partitioned-stats", partitioned, "--per-partition"],
        ["topics", "partitioned-stats", topic],  # not partitioned: 404
        ["topics", "partitioned-stats", partitioned + "-partition-1"],  # 412
    ]

    def upstream(step: list[str]) -> Outcome:
        return outcome(upstream_admin.run("pulsar-admin", str(conf), *step))

    def ours(step: list[str]) -> Outcome:
        return outcome(run_cli("--admin-url", topic_service.url, *step, cwd=tmp_path))

    report = differences(read_only, upstream, ours, lambda: None)
    shown = upstream(["topics", "partitioned-stats", partitioned, "--per-partition"])
    assert shown[0] == 0 and '"storageSize" : ' in shown[1], shown  # stats, not a refusal
    assert shown[1].count("-partition-") == 3, shown
    gone = upstream(["topics", "delete-partitioned-topic", partitioned, "-f"])
    assert gone == (0, "", ""), gone  # the shared service's namespace as it was
    # create, create again (409), delete, delete again (missing), each side on a topic of its own
    made: dict[str, list[Outcome]] = {}
    for side, run in (("upstream", upstream), ("ours", ours)):
        topic_made = f"persistent://acme/plain/made-by-{side}"
        steps = [["topics", verb, topic_made] for verb in ("create", "create", "delete", "delete")]
        steps += [[*step[:2], topic_made, *step[2:]] for step in PARTITIONED_STEPS]
        made[side] = [(code, out.replace(topic_made, "T"), err.replace(topic_made, "T"))
                      for code, out, err in map(run, steps)]
    if made["upstream"] != made["ours"]:
        report.append(f"create/delete\n  upstream: {made['upstream']!r}\n  ours: {made['ours']!r}")
    assert not report, "\n".join(report)
