"""`pulsar-admin brokers list`, end to end."""

from __future__ import annotations

from tests.cli.conftest import CliRunner, failed, ok
from tests.support import RawEtcd


def test_list_prints_one_broker_per_line(cli: CliRunner, clean_store: RawEtcd) -> None:
    assert ok(cli("brokers", "list", "test")) == ""
    clean_store.put("/loadbalance/brokers/broker-1:8080", {"webServiceUrl": "http://broker-1:8080"})
    clean_store.put("/loadbalance/brokers/broker-2:8080", {"webServiceUrl": "http://broker-2:8080"})
    # in the server's order: the load manager's HashSet of the registered ids
    assert ok(cli("brokers", "list", "test")) == "broker-2:8080\nbroker-1:8080\n"


def test_list_needs_the_cluster_argument(cli: CliRunner) -> None:
    err = failed(cli("brokers", "list"))
    assert "Missing argument 'cluster-name'" in err
    assert "Usage: pulsar-admin brokers list" in err
